"""``/v1/jobs``: submit, read, list, cancel and requeue jobs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, Header, Path, Query, Response
from starlette.concurrency import run_in_threadpool

from ...errors import JobGone, JobNotFound
from ...types import TERMINAL_STATES, Job, JobState
from ...wire import requeue_view
from ..auth import Principal, require
from ..errors import ApiError
from ..pagination import decode_job_cursor, encode_cursor
from ..schemas import (
    MAX_JOB_ID,
    NON_BLANK,
    NUL_FREE,
    ArtifactOut,
    AttemptOut,
    Data,
    JobIn,
    JobOut,
    Page,
    RequeueOut,
    Timestamp,
)
from ..service import Service, get_service
from . import AUTHENTICATED, error_responses

__all__ = ["requeue_job", "router"]

log = structlog.get_logger("durq.api")

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=error_responses(*AUTHENTICATED))

ServiceDep = Annotated[Service, Depends(get_service)]
JobIdPath = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="The job's id")]
IDEMPOTENCY_HEADER = Header(
    alias="Idempotency-Key",
    max_length=255,
    pattern=NON_BLANK,
    description="Same key and same body → the original job again; same key, another body → 409",
)


def visible_job(service: Service, principal: Principal, job_id: int) -> Job:
    """The job, if this key may see it; another owner's job is 'not found', not 'forbidden',
    and so is another owner's pruned job: only its owner learns that it is gone."""
    try:
        job = service.app.get_job(job_id)
    except JobGone as gone:
        if principal.tenant is not None and gone.created_by != principal.tenant:
            raise JobNotFound(job_id) from None
        raise
    if principal.tenant is not None and job.created_by != principal.tenant:
        raise JobNotFound(job_id)
    return job


def body_hash(body: JobIn) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@router.post(
    "",
    status_code=202,
    response_model=Data[JobOut],
    responses={
        200: {"model": Data[JobOut], "description": "execution_mode sync: the finished job"},
        **error_responses(409, 410),
    },
    summary="Submit a job",
)
async def submit_job(
    body: JobIn,
    response: Response,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("submit"))],
    idempotency_key: Annotated[str | None, IDEMPOTENCY_HEADER] = None,
) -> dict[str, Any]:
    """``execution_mode: "sync"`` enqueues the job like any other and waits (up to
    ``DURQ_API_SYNC_WAIT_SECONDS``) for a worker to finish it: 200 with the finished job,
    or 202 with the job still pending when the wait ends. Task code never runs inside the
    API server, so no task can stall, crash or double-run it."""
    app = service.app
    sync = body.execution_mode == "sync"
    if sync and (body.run_at is not None or body.delay_seconds is not None):
        raise ApiError(
            422,
            "E_VALIDATION",
            "execution_mode sync waits for the job to run now: drop run_at and "
            "delay_seconds, or use execution_mode async to schedule it",
        )
    new = app.build(
        body.task,
        body.args,
        queue=body.queue,
        priority=body.priority,
        run_at=body.run_at,
        delay=body.delay_seconds,
        max_attempts=body.max_attempts,
        idempotency_key=idempotency_key,
        # Idempotency is per requester, keyed by the hash of the whole request.
        idempotency_scope=f"owner:{principal.owner}" if idempotency_key is not None else None,
        request_hash=body_hash(body) if idempotency_key is not None else None,
        created_by=principal.owner,
        breaker_key=body.breaker_key,
        concurrency_key=body.concurrency_key,
    )
    job, created = await run_in_threadpool(app.insert, new)
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    if sync:
        job = await _wait_finished(service, job, service.settings.api_sync_wait_seconds)
    response.status_code = 200 if sync and job.state in TERMINAL_STATES else 202
    log.info("job_submitted", job_id=job.id, task=job.task, created=created, sync=sync)
    return {"data": job.to_dict()}


async def _wait_finished(service: Service, job: Job, seconds: float) -> Job:
    """The job once it is finished, or as it is when ``seconds`` have passed.

    Polls the job's row with a growing interval (10 ms up to 250 ms): a waiting request
    holds no thread and no connection between looks, so many waiting clients cost the
    server almost nothing, and finishing a job costs the worker no extra notification."""
    deadline = time.monotonic() + seconds
    interval = 0.01
    while job.state not in TERMINAL_STATES:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        await asyncio.sleep(min(interval, left))
        interval = min(interval * 2, 0.25)
        job = await run_in_threadpool(service.app.get_job, job.id)
    return job


@router.get("", response_model=Page[JobOut], summary="List jobs, newest first")
def list_jobs(
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
    state: Annotated[
        list[JobState] | None, Query(description="Repeat to match any of several states")
    ] = None,
    queue: Annotated[str | None, Query(max_length=64, pattern=NUL_FREE)] = None,
    task: Annotated[str | None, Query(max_length=200, pattern=NUL_FREE)] = None,
    created_by: Annotated[str | None, Query(max_length=128, pattern=NUL_FREE)] = None,
    created_after: Annotated[Timestamp | None, Query(description="RFC 3339, inclusive")] = None,
    created_before: Annotated[Timestamp | None, Query(description="RFC 3339, exclusive")] = None,
    limit: Annotated[
        int, Query(ge=1, description="Page size; capped at DURQ_API_MAX_PAGE_SIZE (500)")
    ] = 50,
    cursor: Annotated[str | None, Query(max_length=200, description="next_cursor")] = None,
) -> dict[str, Any]:
    before_id = decode_job_cursor(cursor) if cursor is not None else None
    if principal.tenant is not None:
        if created_by is not None and created_by != principal.tenant:
            return {"data": [], "next_cursor": None}  # other owners' jobs do not exist here
        created_by = principal.tenant
    size = service.page_size(limit)
    jobs = service.app.list_jobs(
        state=[str(s) for s in state] if state else None,
        queue=queue,
        task=task,
        created_by=created_by,
        created_after=created_after,
        created_before=created_before,
        before_id=before_id,
        limit=size + 1,  # one more tells whether another page exists
    )
    page = jobs[:size]
    next_cursor = encode_cursor("j", page[-1].id) if len(jobs) > size else None
    return {"data": [j.to_dict() for j in page], "next_cursor": next_cursor}


@router.get(
    "/{job_id}",
    response_model=Data[JobOut],
    responses=error_responses(404, 410),
    summary="Get a job",
)
def get_job(
    job_id: JobIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
) -> dict[str, Any]:
    return {"data": visible_job(service, principal, job_id).to_dict()}


@router.get(
    "/{job_id}/attempts",
    response_model=Data[list[AttemptOut]],
    responses=error_responses(404, 410),
    summary="A job's attempts, oldest first (the latest DURQ_API_MAX_PAGE_SIZE)",
)
def job_attempts(
    job_id: JobIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
) -> dict[str, Any]:
    visible_job(service, principal, job_id)
    attempts = service.app.attempts(job_id)[-service.page_cap :]
    return {"data": [a.to_dict() for a in attempts]}


@router.get(
    "/{job_id}/artifacts",
    response_model=Data[list[ArtifactOut]],
    responses=error_responses(404, 410),
    summary="A job's typed artifacts (the first DURQ_API_MAX_PAGE_SIZE)",
)
def job_artifacts(
    job_id: JobIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
) -> dict[str, Any]:
    visible_job(service, principal, job_id)
    artifacts = service.app.artifacts(job_id)[: service.page_cap]
    return {"data": [a.to_dict() for a in artifacts]}


@router.post(
    "/{job_id}/cancel",
    response_model=Data[JobOut],
    responses=error_responses(404, 410),
    summary="Cancel a job (a finished job is returned unchanged)",
)
def cancel_job(
    job_id: JobIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("submit"))],
) -> dict[str, Any]:
    visible_job(service, principal, job_id)
    job = service.app.cancel(job_id)
    log.info("job_cancel", job_id=job_id, state=str(job.state))
    return {"data": job.to_dict()}


@router.post(
    "/{job_id}/requeue",
    response_model=Data[RequeueOut],
    responses=error_responses(404, 410),
    summary="Requeue a job (a running job is left alone: idempotent no-op)",
)
def requeue(
    job_id: JobIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    return {"data": requeue_job(service, job_id)}


def requeue_job(service: Service, job_id: int) -> dict[str, Any]:
    """Running → unchanged with ``idempotent: true``; any other state → queued with attempts,
    error and finish time reset; ``enqueue_dispatched`` says whether idle workers were
    woken (a notification sent, or a worker in this process)."""
    result = service.app.requeue(job_id)
    log.info(
        "job_requeue", job_id=job_id, idempotent=result.idempotent, state=str(result.job.state)
    )
    return requeue_view(result)
