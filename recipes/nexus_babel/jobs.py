"""The seed's job queue on durq: four job types, its state names, its envelopes.

durq keeps its own vocabulary; this module maps it: ``dead_letter`` is the seed's
``failed``, a durq ``Attempt`` is a ``JobAttempt``, a durq ``Artifact`` a ``JobArtifact``.
Idempotency is per ``(job_type, idempotency_key)``: the scope is the job type, and one
request hash per type makes a repeated key return the first job whatever its payload
(FR-008), as the seed's unique constraint did.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from opentelemetry.trace import Status, StatusCode, Tracer

import durq

from .db import AuditLog, DBManager
from .domain import (
    AnalysisService,
    EvolutionService,
    IngestionService,
    IntegrityService,
    InvalidPayload,
)
from .observability import get_tracer

__all__ = [
    "ARTIFACT_TYPES",
    "JOB_TYPES",
    "QUEUE",
    "RECOVERY_ACTION",
    "RETRY_BACKOFF_SECONDS",
    "SEED_STATUS",
    "JobService",
    "job_view",
]

QUEUE = "nexus_babel"
JOB_TYPES = ("ingest_batch", "analyze", "branch_replay", "integrity_audit")
ARTIFACT_TYPES = {job_type: f"{job_type}_result" for job_type in JOB_TYPES}
RETRY_BACKOFF_SECONDS = (2, 10, 30)
RECOVERY_ACTION = "job.stale_lease_recovered"

SEED_STATUS = {
    durq.JobState.QUEUED: "queued",
    durq.JobState.RUNNING: "running",
    durq.JobState.RETRY_WAIT: "retry_wait",
    durq.JobState.SUCCEEDED: "succeeded",
    durq.JobState.DEAD_LETTER: "failed",
    durq.JobState.CANCELLED: "cancelled",
}
DURQ_STATE = {seed: str(state) for state, seed in SEED_STATUS.items()}
ATTEMPT_STATUS = {"succeeded": "succeeded", "cancelled": "cancelled"}  # every other: failed

log = structlog.get_logger("nexus_babel.jobs")


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _classify(exc: BaseException) -> durq.Fail | None:
    """A payload that can never work fails at once instead of using its retries."""
    if isinstance(exc, InvalidPayload):
        return durq.Fail("invalid_payload", str(exc))
    return None


def job_view(
    job: durq.Job,
    attempts: list[durq.Attempt] | None = None,
    artifacts: list[durq.Artifact] | None = None,
) -> dict[str, Any]:
    """The seed's ``JobStatusResponse``."""
    running = job.state is durq.JobState.RUNNING
    view: dict[str, Any] = {
        "job_id": str(job.id),
        "job_type": job.task,
        "status": SEED_STATUS[job.state],
        "payload": job.args.get("payload"),
        "result": job.result,
        "error_text": job.last_error,
        "execution_mode": job.args.get("execution_mode", "async"),
        "request_id": job.args.get("request_id"),
        "idempotency_key": job.idempotency_key,
        "max_attempts": job.max_attempts,
        "attempt_count": job.attempt,
        "next_run_at": _ts(job.run_at),
        # a lease exists only while running; durq keeps the last worker id after that
        "lease_owner": job.worker_id if running else None,
        "lease_expires_at": _ts(job.lease_expires_at) if running else None,
        "cancel_requested": job.cancel_requested,
        "created_by": job.created_by,
        "created_at": _ts(job.created_at),
        "updated_at": _ts(job.updated_at),
    }
    if attempts is not None:
        records = [
            {
                "attempt_number": a.attempt,
                "status": ATTEMPT_STATUS.get(a.outcome, "failed"),
                "outcome": a.outcome,
                "error_text": a.error_message,
                "worker_id": a.worker_id,
                "started_at": _ts(a.started_at),
                "finished_at": _ts(a.finished_at),
                "runtime_ms": a.runtime_ms,
            }
            for a in attempts
        ]
        if job.state is durq.JobState.RUNNING:  # durq records an attempt when it ends
            records.append(
                {
                    "attempt_number": job.attempt,
                    "status": "running",
                    "outcome": None,
                    "error_text": None,
                    "worker_id": job.worker_id,
                    "started_at": _ts(job.attempted_at),
                    "finished_at": None,
                    "runtime_ms": None,
                }
            )
        view["attempts"] = records
    if artifacts is not None:
        view["artifacts"] = [
            {
                "artifact_type": a.artifact_type,
                "artifact_ref": a.ref,
                "artifact_payload": a.payload,
                "created_at": _ts(a.created_at),
            }
            for a in artifacts
        ]
    return view


class JobService:
    def __init__(
        self,
        queue_app: durq.App,
        db: DBManager,
        ingestion: IngestionService,
        analysis: AnalysisService,
        evolution: EvolutionService,
        integrity: IntegrityService,
        *,
        max_attempts: int = 3,
        idempotency_ttl: float = 365 * 24 * 3600,
        on_finished: Callable[[str, str, float], None] | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.queue_app = queue_app
        self.db = db
        self.ingestion = ingestion
        self.analysis = analysis
        self.evolution = evolution
        self.integrity = integrity
        self.idempotency_ttl = idempotency_ttl
        self.on_finished = on_finished
        self.tracer = tracer or get_tracer()
        for job_type in JOB_TYPES:
            queue_app.task(
                name=job_type,
                queue=QUEUE,
                retry=durq.Fixed(RETRY_BACKOFF_SECONDS),
                max_attempts=max_attempts,
                classifier=_classify,
                pass_context=True,
            )(self._task_for(job_type))

    # ---- execution -------------------------------------------------------------------

    def dispatch(
        self, job_type: str, payload: dict[str, Any], checkpoint: Callable[[], bool]
    ) -> dict[str, Any]:
        if job_type == "ingest_batch":
            return self.ingestion.ingest_batch(payload.get("paths", []), checkpoint)
        if job_type == "analyze":
            return self.analysis.analyze(payload)
        if job_type == "branch_replay":
            return self.evolution.replay_branch(payload.get("branch", ""), checkpoint)
        if job_type == "integrity_audit":
            return self.integrity.audit()
        raise ValueError(f"Unsupported job type: {job_type!r}; use one of {list(JOB_TYPES)}")

    def _task_for(self, job_type: str) -> Callable[..., dict[str, Any]]:
        def run(
            ctx: durq.JobContext,
            payload: dict[str, Any],
            execution_mode: str = "async",
            request_id: str | None = None,
        ) -> dict[str, Any]:
            job = ctx.job
            ids: dict[str, str | int | None] = {
                "job_id": job.id,
                "job_type": job_type,
                "attempt": job.attempt,
                "worker_id": ctx.worker_id,
                "request_id": request_id,  # the request that submitted the job
            }
            with (
                structlog.contextvars.bound_contextvars(**ids),
                self.tracer.start_as_current_span(
                    f"nexus_babel.job {job_type}",
                    attributes={f"nexus.{k}": v for k, v in ids.items() if v is not None},
                ) as span,
            ):
                log.info("job started", execution_mode=execution_mode)
                started = time.perf_counter()
                try:
                    result = self.dispatch(job_type, payload or {}, ctx.heartbeat)
                except BaseException as exc:
                    runtime_ms = self._finished(job_type, "error", started)
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    log.warning(
                        "job attempt failed",
                        error=f"{type(exc).__name__}: {exc}",
                        runtime_ms=runtime_ms,
                    )
                    raise
                ctx.add_artifact(ARTIFACT_TYPES[job_type], result)
                runtime_ms = self._finished(job_type, "succeeded", started)
                log.info("job succeeded", runtime_ms=runtime_ms)
                return result

        run.__name__ = job_type
        return run

    def _finished(self, job_type: str, outcome: str, started: float) -> float:
        runtime_ms = (time.perf_counter() - started) * 1000
        if self.on_finished is not None:
            self.on_finished(job_type, outcome, runtime_ms)
        return round(runtime_ms, 2)

    # ---- the service's operations ----------------------------------------------------

    def submit(
        self,
        job_type: str,
        payload: dict[str, Any],
        *,
        execution_mode: str = "async",
        idempotency_key: str | None = None,
        created_by: str | None = None,
        max_attempts: int | None = None,
        request_id: str | None = None,
    ) -> tuple[durq.Job, bool]:
        """``(job, created)``; ``created`` is False when the key returned an earlier job."""
        if job_type not in JOB_TYPES:
            raise ValueError(f"Unsupported job type: {job_type!r}; use one of {list(JOB_TYPES)}")
        new = self.queue_app.build(
            job_type,
            {"payload": payload, "execution_mode": execution_mode, "request_id": request_id},
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
            idempotency_scope=f"nexus_babel:{job_type}",
            idempotency_ttl=self.idempotency_ttl,
            created_by=created_by,
            request_hash=hashlib.sha256(job_type.encode()).hexdigest(),
        )
        return self.queue_app.insert(new)

    def get(self, job_id: int) -> dict[str, Any]:
        job = self.queue_app.get_job(job_id)
        if job.queue != QUEUE:
            raise durq.JobNotFound(job_id)
        return job_view(job, self.queue_app.attempts(job_id), self.queue_app.artifacts(job_id))

    def list_jobs(
        self,
        *,
        status: str | None = None,
        job_type: str | None = None,
        created_by: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        cursor: int | None = None,
        limit: int = 50,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Newest first; ``next_cursor`` pages on (None on the last page)."""
        if status is not None and status not in DURQ_STATE:
            raise ValueError(f"unknown status {status!r}; use one of {sorted(DURQ_STATE)}")
        jobs = self.queue_app.list_jobs(
            state=DURQ_STATE[status] if status else None,
            queue=QUEUE,
            task=job_type,
            created_by=created_by,
            created_after=created_after,
            created_before=created_before,
            before_id=cursor,
            limit=limit + 1,
        )
        more = len(jobs) > limit
        page = jobs[:limit]
        return [job_view(j) for j in page], (str(page[-1].id) if more else None)

    def cancel(self, job_id: int) -> dict[str, Any]:
        """queued/retry_wait → cancelled, lease cleared; running → cancel requested (the
        task stops at its next checkpoint); terminal → unchanged (FR-013)."""
        self.get(job_id)
        self.queue_app.cancel(job_id)
        return self.get(job_id)

    def recover_stale_leases(self, recovered_by: str) -> list[dict[str, Any]]:
        """Expired leases → retry_wait (same backoff) or failed; each recovery leaves an
        audit event naming the worker that lost the lease (US-INFRA-10, US-INFRA-20)."""
        recovered = []
        for job in self.queue_app.reclaim_expired():
            lost = [a for a in self.queue_app.attempts(job.id) if a.outcome == "lost"]
            original = lost[-1].worker_id if lost else None
            details = {
                "job_id": str(job.id),
                "job_type": job.task,
                "original_lease_owner": original,
                "recovered_by": recovered_by,
                "attempt_number": lost[-1].attempt if lost else job.attempt,
                "status": SEED_STATUS[job.state],
                "next_run_at": _ts(job.run_at),
            }
            with self.db.session() as session, session.begin():
                session.add(
                    AuditLog(
                        action="job.stale_lease_recovered", actor=recovered_by, details=details
                    )
                )
            recovered.append(details)
        return recovered

    def status_counts(self) -> dict[str, int]:
        counts = self.queue_app.queue_stats().get(QUEUE, {}).get("counts", {})
        return {SEED_STATUS[durq.JobState(k)]: int(v) for k, v in counts.items()}
