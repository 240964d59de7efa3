"""Euterpe's HTTP API (seed 003 §6): submit a transcode, read its status, push credentials.

* ``POST /transcode`` (API key): enqueue only; ``202`` with ``job_id``. Idempotent per
  ``(requester_id, idempotency_key)``: the same request hash returns the stored response
  snapshot (the same ``job_id``), another hash answers ``409``.
* ``GET /transcode/status?job_id=N``: ``200`` for every non-error state, ``404`` unknown,
  ``401`` without a valid key, ``403`` for another requester's job, ``410`` once pruned.
* ``POST /transcode/credentials``: the requester stores refreshed credentials (the answer to
  a worker's signed refresh call); the job's ``credential_version`` advances.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError

import durq

from .config import QUEUE, Settings
from .schemas import CredentialsPush, TranscodeRequest
from .service import Euterpe
from .states import status_of
from .store import Snapshot, Store
from .tasks import TASK

__all__ = ["create_app"]


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = message


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _euterpe(request: Request) -> Euterpe:
    found: Euterpe = request.app.state.euterpe
    return found


def _requester(request: Request, x_api_key: Annotated[str | None, Header()] = None) -> str:
    svc: Euterpe = request.app.state.euterpe
    found = svc.settings.requester_for(x_api_key)
    if found is None:
        raise ApiError(401, "unauthorized", "send a valid API key in the X-API-Key header")
    return found


Service = Annotated[Euterpe, Depends(_euterpe)]
Requester = Annotated[str, Depends(_requester)]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        euterpe = Euterpe(settings)
        euterpe.start()
        api.state.euterpe = euterpe
        try:
            yield
        finally:
            euterpe.close()

    api = FastAPI(title="Euterpe", lifespan=lifespan)

    @api.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return _error(422, "invalid_request", problems)

    @api.post("/transcode", status_code=202)
    def submit(body: TranscodeRequest, svc: Service, who: Requester) -> JSONResponse:
        request_hash = body.request_hash()
        for _ in range(2):  # a concurrent twin may store the snapshot first: read it then
            try:
                return JSONResponse(_submit(svc, who, body, request_hash), status_code=202)
            except IntegrityError:
                continue
        raise ApiError(409, "conflict", "a concurrent request with this key is in flight")

    @api.get("/transcode/status")
    def status(svc: Service, who: Requester, job_id: Annotated[int, Query(ge=1)]) -> dict[str, Any]:
        job = _owned_job(svc, who, job_id)
        return _status_view(svc, job)

    @api.post("/transcode/credentials")
    def push_credentials(body: CredentialsPush, svc: Service, who: Requester) -> dict[str, Any]:
        _owned_job(svc, who, body.job_id)
        version = svc.app.update_secrets(
            body.job_id,
            body.storage_credentials.plain(),
            expected_version=body.credential_version,
        )
        return {"job_id": body.job_id, "credential_version": version}

    return api


def _submit(svc: Euterpe, who: str, body: TranscodeRequest, request_hash: str) -> dict[str, Any]:
    ttl = svc.settings.idempotency_ttl_seconds
    with svc.store.engine.begin() as conn:
        found = Store.find(conn, who, body.idempotency_key)
        if found is not None:
            if found.request_hash != request_hash:
                raise _conflict(body.idempotency_key, found.job_id)
            return found.response
        try:
            new = svc.app.build(
                TASK,
                body.job_args(),
                queue=QUEUE,
                created_by=who,
                idempotency_key=body.idempotency_key,
                idempotency_scope=f"euterpe:{who}",
                idempotency_ttl=ttl,
                request_hash=request_hash,
                webhook_url=body.status_webhook_url,
            )
            secrets = svc.app.check_secrets(body.storage_credentials.plain(), body.refresh_url)
            job, _ = svc.app.insert(
                new, connection=conn, secrets=secrets, refresh_url=body.refresh_url
            )
        except durq.IdempotencyConflict as exc:
            raise _conflict(body.idempotency_key, exc.existing_job_id) from None
        except durq.ValidationError as exc:
            raise ApiError(422, "invalid_request", str(exc)) from None
        response = {
            "job_id": job.id,
            "status": "queued",
            "status_url": f"/transcode/status?job_id={job.id}",
        }
        snapshot = Snapshot(request_hash, job.id, response)
        Store.remember(conn, who, body.idempotency_key, snapshot, ttl)
    return response


def _conflict(key: str, job_id: int) -> ApiError:
    return ApiError(
        409,
        "idempotency_conflict",
        f"idempotency key {key!r} was used for another request (job {job_id}); use a new key "
        "for a different request",
    )


def _owned_job(svc: Euterpe, who: str, job_id: int) -> durq.Job:
    try:
        job = svc.app.get_job(job_id)
    except durq.JobGone:
        raise ApiError(410, "gone", f"job {job_id} finished and was pruned") from None
    except durq.JobNotFound:
        raise ApiError(404, "not_found", f"no job {job_id}") from None
    if job.task != TASK:  # another application's job in the same database
        raise ApiError(404, "not_found", f"no job {job_id}")
    if job.created_by != who:
        raise ApiError(403, "forbidden", f"job {job_id} belongs to another requester")
    return job


def _status_view(svc: Euterpe, job: durq.Job) -> dict[str, Any]:
    status = status_of(job)
    view: dict[str, Any] = {
        "job_id": job.id,
        "status": status,
        "attempt_count": job.attempt,
        "max_attempts": job.max_attempts,
        "claim_version": job.claim_version,
        "worker_id": job.worker_id if str(job.state) == "running" else None,
        "lease_expires_at": _iso(job.lease_expires_at) if str(job.state) == "running" else None,
        "credential_version": svc.app.credential_version(job.id),
        "counters": svc.app.job_counters(job.id),
        "updated_at": _iso(job.updated_at),
    }
    if status == "succeeded":
        view["outputs"] = (job.result or {}).get("outputs", [])
    if job.last_error_code is not None:
        view["error"] = {
            "code": job.last_error_code,
            "message": job.last_error,
            "attempt": job.attempt,
        }
    if str(job.state) == "retry_wait":
        view["retry_at"] = _iso(job.run_at)
    return view


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None
