"""The ``/api/v1`` routes: every one needs an ``X-Nexus-API-Key`` (FR-001)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

import durq

from .auth import ROLE_ORDER, AuthContext, mode_allows, role_allows
from .db import AuditLog
from .domain import InvalidPayload
from .jobs import JOB_TYPES

__all__ = ["router"]

router = APIRouter(prefix="/api/v1")

INVALID_KEY = "Missing or invalid API key"
FLAGGED_TERMS = ("confound", "scatter", "death", "folly")


def require(minimum: str) -> Callable[..., AuthContext]:
    """A dependency: the caller's key context, if its role is at least ``minimum``."""
    if minimum not in ROLE_ORDER:
        raise ValueError(f"unknown role {minimum!r}")

    def dependency(
        request: Request,
        response: Response,
        x_nexus_api_key: Annotated[str | None, Header()] = None,
    ) -> AuthContext:
        state = request.app.state
        ctx: AuthContext | None = state.auth_service.authenticate(x_nexus_api_key)
        if ctx is None:
            raise HTTPException(status_code=401, detail=INVALID_KEY)
        wait = state.rate_limiter.take(ctx.api_key_id)
        if wait > 0:
            raise HTTPException(
                status_code=429,
                detail="Rate limit exceeded for this API key; retry after the Retry-After seconds",
                headers={"Retry-After": state.rate_limiter.retry_after_header(wait)},
            )
        if not role_allows(ctx.role, minimum):
            raise HTTPException(
                status_code=403, detail=f"Insufficient role: {minimum} or higher is required"
            )
        request.state.owner = ctx.owner
        return ctx

    return dependency


Viewer = Annotated[AuthContext, Depends(require("viewer"))]
Operator = Annotated[AuthContext, Depends(require("operator"))]


def _require_mode(request: Request, ctx: AuthContext, mode: str) -> None:
    if not mode_allows(request.app.state.settings, ctx, mode):
        raise HTTPException(
            status_code=403,
            detail="RAW mode requires NEXUS_RAW_MODE_ENABLED, a key with raw_mode_enabled "
            "and the researcher role or higher",
        )


@router.get("/auth/whoami")
def whoami(request: Request, ctx: Viewer) -> dict[str, Any]:
    return {
        "api_key_id": ctx.api_key_id,
        "owner": ctx.owner,
        "role": ctx.role,
        "raw_mode_enabled": ctx.raw_mode_enabled,
        "allowed_modes": ctx.allowed_modes(request.app.state.settings),
    }


@router.get("/documents")
def list_documents(request: Request, ctx: Viewer) -> dict[str, Any]:
    docs = request.app.state.ingestion_service.list_documents()
    return {"documents": docs, "total": len(docs)}


class IngestBatchRequest(BaseModel):
    paths: list[str] = Field(min_length=1)


@router.post("/ingest/batch")
def ingest_batch(request: Request, body: IngestBatchRequest, ctx: Operator) -> dict[str, Any]:
    try:
        result: dict[str, Any] = request.app.state.ingestion_service.ingest_batch(body.paths)
    except InvalidPayload as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except FileNotFoundError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return result


class GovernanceRequest(BaseModel):
    text: str = Field(max_length=100_000)
    mode: Literal["PUBLIC", "RAW"] = "PUBLIC"


@router.post("/governance/evaluate")
def governance_evaluate(request: Request, body: GovernanceRequest, ctx: Viewer) -> dict[str, Any]:
    """PUBLIC answers with flagged terms masked; RAW (gated by FR-003) shows them."""
    _require_mode(request, ctx, body.mode)
    pattern = re.compile(r"\b(" + "|".join(FLAGGED_TERMS) + r")\w*", re.IGNORECASE)
    hits = sorted({m.group(0).lower() for m in pattern.finditer(body.text)})
    text = body.text if body.mode == "RAW" else pattern.sub("[redacted]", body.text)
    with request.app.state.db.session() as session, session.begin():
        session.add(
            AuditLog(
                action="governance.evaluate",
                mode=body.mode,
                actor=ctx.owner,
                details={"flag_count": len(hits)},
            )
        )
    return {"mode": body.mode, "allow": not hits, "flags": hits, "text": text}


@router.get("/plugins/health")
def plugins_health(request: Request, ctx: Viewer) -> dict[str, bool]:
    health: dict[str, bool] = request.app.state.plugin_registry.health()
    return health


class JobSubmitRequest(BaseModel):
    job_type: Literal["ingest_batch", "analyze", "branch_replay", "integrity_audit"]
    payload: dict[str, Any] = Field(default_factory=dict)
    execution_mode: Literal["async", "sync"] = "async"
    idempotency_key: str | None = Field(None, min_length=1, max_length=128)
    max_attempts: int | None = Field(None, ge=1, le=10)


def _due(job: durq.Job) -> bool:
    """Ready and due now (a retry waits for its backoff even when resubmitted in sync)."""
    ready = job.state in (durq.JobState.QUEUED, durq.JobState.RETRY_WAIT)
    return ready and job.run_at <= datetime.now(UTC)


def _job_id(raw: str) -> int:
    if not raw.isdigit():
        raise HTTPException(status_code=404, detail=f"Job {raw} not found")
    return int(raw)


def _get_job(request: Request, job_id: int) -> dict[str, Any]:
    try:
        view: dict[str, Any] = request.app.state.job_service.get(job_id)
    except durq.JobNotFound:
        raise HTTPException(status_code=404, detail=f"Job {job_id} not found") from None
    return view


@router.post("/jobs/submit", response_model=None)
def submit_job(request: Request, body: JobSubmitRequest, ctx: Operator) -> JSONResponse:
    state = request.app.state
    if body.execution_mode == "async" and not state.settings.async_jobs_enabled:
        raise HTTPException(status_code=400, detail="Async jobs are disabled by feature flag")
    sync = body.execution_mode == "sync"
    if sync and not state.sync_runner.acquire():
        raise HTTPException(
            status_code=429,
            detail="Too many sync jobs are running; retry shortly or submit with "
            "execution_mode=async",
            headers={"Retry-After": "1"},
        )
    try:
        job, created = state.job_service.submit(
            body.job_type,
            body.payload,
            execution_mode=body.execution_mode,
            idempotency_key=body.idempotency_key,
            created_by=ctx.owner,
            max_attempts=body.max_attempts,
            request_id=getattr(request.state, "request_id", None),
        )
    except (ValueError, durq.ValidationError) as exc:
        if sync:
            state.sync_runner.release()
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except BaseException:
        if sync:
            state.sync_runner.release()
        raise
    if sync and _due(job):
        job = state.sync_runner.run(job.id)
    elif sync:  # an idempotent replay of a job that is running, waiting or done
        state.sync_runner.release()
    view = _get_job(request, job.id)
    # 202: a sync job not done by the deadline is still running: poll GET /jobs/{id}
    status_code = 202 if sync and view["status"] == "running" else 200
    content = {
        "job_id": view["job_id"],
        "job_type": view["job_type"],
        "status": view["status"],
        "execution_mode": view["execution_mode"],
        "idempotent_replay": not created,
        "result": view["result"],
        "error_text": view["error_text"],
    }
    return JSONResponse(content, status_code=status_code)


@router.get("/jobs/{job_id}")
def get_job(request: Request, job_id: str, ctx: Viewer) -> dict[str, Any]:
    return _get_job(request, _job_id(job_id))


@router.get("/jobs")
def list_jobs(
    request: Request,
    ctx: Viewer,
    status: Annotated[
        Literal["queued", "running", "retry_wait", "succeeded", "failed", "cancelled"] | None,
        Query(),
    ] = None,
    job_type: Annotated[str | None, Query()] = None,
    created_by: Annotated[str | None, Query()] = None,
    created_after: Annotated[datetime | None, Query()] = None,
    created_before: Annotated[datetime | None, Query()] = None,
    cursor: Annotated[str | None, Query(pattern=r"^\d+$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    if job_type is not None and job_type not in JOB_TYPES:
        raise HTTPException(status_code=422, detail=f"job_type must be one of {list(JOB_TYPES)}")
    for name, value in (("created_after", created_after), ("created_before", created_before)):
        if value is not None and value.tzinfo is None:
            raise HTTPException(
                status_code=422, detail=f"{name} needs a timezone, e.g. 2026-01-01T00:00:00Z"
            )
    jobs, next_cursor = request.app.state.job_service.list_jobs(
        status=status,
        job_type=job_type,
        created_by=created_by,
        created_after=created_after,
        created_before=created_before,
        cursor=int(cursor) if cursor else None,
        limit=limit,
    )
    return {"jobs": jobs, "next_cursor": next_cursor}


@router.post("/jobs/{job_id}/cancel")
def cancel_job(request: Request, job_id: str, ctx: Operator) -> dict[str, Any]:
    jid = _job_id(job_id)
    try:
        view: dict[str, Any] = request.app.state.job_service.cancel(jid)
    except durq.JobNotFound:
        raise HTTPException(status_code=404, detail=f"Job {jid} not found") from None
    return view
