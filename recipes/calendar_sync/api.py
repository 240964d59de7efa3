"""The HTTP API: ``POST /auth/session``, ``POST /jobs/schedule``, reads and ``/metrics``.

Errors are ``{"error": {"code", "message", ...}}``: 400 a malformed body or unknown keys,
401 no valid session, 403 not an admin or a missing CSRF token, 409 a paused pair (with
the alert) or an Idempotency-Key reused for another request.
"""

# No ``from __future__ import annotations``: FastAPI reads the dependencies (closures
# over the settings) from the live annotations.
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Annotated, Any
from uuid import UUID

import pydantic
import structlog
from fastapi import Depends, FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

import durq
from durq.api import JobMetricsCollector

from .auth import (
    CSRF_COOKIE,
    CSRF_HEADER,
    SESSION_COOKIE,
    Session,
    check_credentials,
    issue_session,
    read_session,
)
from .config import Settings
from .executor import SyncExecutor
from .service import QUEUE, CalendarSync, PairPaused, ScheduleRequest

__all__ = ["ApiError", "create_app"]

log = structlog.get_logger("calendar_sync.api")

MAX_WINDOW = timedelta(days=31)
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9._:\-]{1,200}$")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class WindowIn(Strict):
    start: AwareDatetime
    end: AwareDatetime

    @model_validator(mode="after")
    def _ordered(self) -> "WindowIn":
        if self.end <= self.start:
            raise ValueError("window.end must be after window.start")
        if self.end - self.start > MAX_WINDOW:
            raise ValueError(f"a window may span at most {MAX_WINDOW.days} days")
        return self


class ScheduleIn(Strict):
    """The seed's schedule request; unknown keys are refused."""

    pairId: UUID
    window: WindowIn
    connectorId: UUID | None = None
    priority: int = Field(0, ge=-1000, le=1000)
    payload: dict[str, Any] = Field(default_factory=dict)


class LoginIn(Strict):
    email: str = Field(min_length=1, max_length=320)
    password: str = Field(min_length=1, max_length=1024)


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status_code=status)


def _problems(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    return [
        {"field": ".".join(str(p) for p in e["loc"]) or "body", "problem": e["msg"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]


async def _parsed(request: Request, model: type[Strict]) -> Any:
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"null")
    except pydantic.ValidationError as exc:
        raise ApiError(
            400, "invalid_request", "the request body is invalid", details=_problems(exc)
        ) from None


def create_app(
    settings: Settings | None = None,
    *,
    executor: SyncExecutor | None = None,
    run_worker: bool = False,
) -> FastAPI:
    """The API over a :class:`CalendarSync` (its durq schema migrated at start). With
    ``run_worker=True`` a durq worker runs in this process too (the demo)."""
    settings = settings or Settings()
    sync = CalendarSync(settings, executor)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sync.migrate()
        worker = _start_worker(sync) if run_worker else None
        try:
            yield
        finally:
            if worker is not None:
                worker.request_stop()
                worker.finished.wait(30)
            sync.close()

    app = FastAPI(title="calendar sync on durq", lifespan=lifespan)
    app.state.sync = sync
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobMetricsCollector(sync.app))

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message, **exc.extra)

    @app.exception_handler(durq.JobNotFound)
    async def not_found(request: Request, exc: durq.JobNotFound) -> JSONResponse:
        return _error(404, "not_found", str(exc))

    def session(request: Request) -> Session:
        found = read_session(settings, request.cookies.get(SESSION_COOKIE))
        if found is None:
            raise ApiError(401, "unauthenticated", "log in first: POST /auth/session")
        return found

    def admin(current: Annotated[Session, Depends(session)]) -> Session:
        if current.role != "admin":
            raise ApiError(403, "forbidden", "scheduling jobs needs an admin session")
        return current

    def admin_with_csrf(
        current: Annotated[Session, Depends(admin)],
        csrf: Annotated[str | None, Header(alias=CSRF_HEADER)] = None,
    ) -> Session:
        if not current.csrf_matches(csrf):
            raise ApiError(
                403,
                "csrf_failed",
                f"send the CSRF token of your session in {CSRF_HEADER} "
                "(it comes with POST /auth/session)",
            )
        return current

    @app.post("/auth/session")
    async def login(request: Request) -> JSONResponse:
        body = await _parsed(request, LoginIn)
        role = check_credentials(settings, body.email, body.password)
        if role is None:
            log.warning("login_refused")
            raise ApiError(401, "invalid_credentials", "wrong email or password")
        cookie, new = issue_session(settings, body.email, role)
        response = JSONResponse(
            {
                "email": new.email,
                "role": new.role,
                "csrfToken": new.csrf,
                "expiresAt": new.expires_at,
            }
        )
        common: dict[str, Any] = {
            "max_age": settings.session_ttl_seconds,
            "secure": settings.cookie_secure,
            "samesite": "strict",
            "path": "/",
        }
        response.set_cookie(SESSION_COOKIE, cookie, httponly=True, **common)
        response.set_cookie(CSRF_COOKIE, new.csrf, httponly=False, **common)
        log.info("login", role=role)
        return response

    @app.post("/jobs/schedule", status_code=202)
    async def schedule(
        request: Request,
        current: Annotated[Session, Depends(admin_with_csrf)],
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    ) -> JSONResponse:
        if idempotency_key is not None and not IDEMPOTENCY_KEY_RE.match(idempotency_key):
            raise ApiError(
                400,
                "invalid_idempotency_key",
                "Idempotency-Key must be 1 to 200 letters, digits or . _ : -",
            )
        body = await _parsed(request, ScheduleIn)
        req = ScheduleRequest(
            pair_id=body.pairId,
            window_start=body.window.start,
            window_end=body.window.end,
            connector_id=body.connectorId,
            priority=body.priority,
            payload=body.payload,
        )
        try:
            jobs = sync.schedule(req, idempotency_key=idempotency_key)
        except PairPaused as exc:
            raise ApiError(
                409,
                "pair_paused",
                str(exc),
                pairId=exc.pair_id,
                connectorId=exc.connector_id,
                pausedUntil=exc.paused_until,
                alert=exc.alert.to_dict() if exc.alert else None,
            ) from None
        except durq.IdempotencyConflict:
            raise ApiError(
                409,
                "idempotency_conflict",
                "this Idempotency-Key was used for another request; use a new key",
            ) from None
        return JSONResponse(
            {"jobIds": [j.id for j in jobs], "jobs": [j.to_dict() for j in jobs]},
            status_code=202,
        )

    @app.get("/jobs")
    def list_jobs(
        current: Annotated[Session, Depends(session)], status: str | None = None
    ) -> dict[str, Any]:
        try:
            found = sync.jobs(status=status)
        except durq.ValidationError as exc:
            raise ApiError(400, "invalid_request", str(exc)) from None
        return {"jobs": [j.to_dict() for j in found]}

    @app.get("/jobs/{job_id}")
    def get_job(job_id: int, current: Annotated[Session, Depends(session)]) -> dict[str, Any]:
        return {
            "job": sync.job(job_id).to_dict(),
            "logs": [entry.to_dict() for entry in sync.logs(job_id)],
        }

    @app.get("/connector-failure-stats")
    def stats(current: Annotated[Session, Depends(session)]) -> dict[str, Any]:
        return {"stats": [s.to_dict() for s in sync.failure_stats()]}

    @app.get("/alerts")
    def alerts(
        current: Annotated[Session, Depends(session)], state: str = "open"
    ) -> dict[str, Any]:
        try:
            found = sync.alerts(state=state)
        except durq.ValidationError as exc:
            raise ApiError(400, "invalid_request", str(exc)) from None
        return {"alerts": [a.to_dict() for a in found]}

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "queue": QUEUE}

    return app


def _start_worker(sync: CalendarSync) -> durq.Worker:
    worker = durq.Worker(
        sync.app,
        queues=[QUEUE],
        concurrency=sync.settings.worker_concurrency,
        poll_interval=sync.settings.worker_poll_seconds,
    )
    threading.Thread(
        target=worker.run, kwargs={"install_signals": False}, name="calendar-sync-worker"
    ).start()
    return worker
