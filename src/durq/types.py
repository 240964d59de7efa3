"""Plain data that every layer shares. No I/O here."""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "ACTIVE_STATES",
    "QUEUE_NAME_RE",
    "READY_STATES",
    "TERMINAL_STATES",
    "Artifact",
    "Attempt",
    "Finished",
    "Job",
    "JobState",
    "OutboxEvent",
    "RequeueResult",
    "SealedSecrets",
    "WorkerInfo",
]

QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class JobState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    DEAD_LETTER = "dead_letter"
    CANCELLED = "cancelled"


READY_STATES = frozenset({JobState.QUEUED, JobState.RETRY_WAIT})
ACTIVE_STATES = frozenset({JobState.QUEUED, JobState.RUNNING, JobState.RETRY_WAIT})
TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.DEAD_LETTER, JobState.CANCELLED})


@dataclass(frozen=True, slots=True)
class Job:
    """One row of ``durq_jobs`` as the rest of durq sees it."""

    id: int
    queue: str
    task: str
    args: dict[str, Any]
    state: JobState
    stage: str | None
    priority: int
    attempt: int
    max_attempts: int
    claim_version: int
    worker_id: str | None
    run_at: datetime
    created_at: datetime
    updated_at: datetime
    attempted_at: datetime | None = None
    finished_at: datetime | None = None
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    last_error_code: str | None = None
    last_error: str | None = None
    result: Any = None
    retry_policy: dict[str, Any] = field(default_factory=dict)
    cancel_requested: bool = False
    created_by: str | None = None
    idempotency_key: str | None = None
    breaker_key: str | None = None
    concurrency_key: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (CLI ``--json`` and the HTTP API use this)."""

        def ts(value: datetime | None) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "id": self.id,
            "queue": self.queue,
            "task": self.task,
            "args": self.args,
            "state": str(self.state),
            "stage": self.stage,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "claim_version": self.claim_version,
            "worker_id": self.worker_id,
            "priority": self.priority,
            "run_at": ts(self.run_at),
            "created_at": ts(self.created_at),
            "updated_at": ts(self.updated_at),
            "finished_at": ts(self.finished_at),
            "lease_expires_at": ts(self.lease_expires_at),
            "cancel_requested": self.cancel_requested,
            "created_by": self.created_by,
            "breaker_key": self.breaker_key,
            "concurrency_key": self.concurrency_key,
            "last_error_code": self.last_error_code,
            "last_error": self.last_error,
            "result": self.result,
        }


@dataclass(frozen=True, slots=True)
class Finished:
    """What a worker's fenced outcome write left on a job: enough to log and count it, and
    no more (reading back the whole row would double what a finish costs the worker)."""

    id: int
    state: JobState
    run_at: datetime
    last_error_code: str | None = None
    last_error: str | None = None

    @classmethod
    def of(cls, job: Job) -> Finished:
        return cls(job.id, job.state, job.run_at, job.last_error_code, job.last_error)


@dataclass(frozen=True, slots=True)
class Attempt:
    job_id: int
    attempt: int
    claim_version: int
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime
    runtime_ms: int | None
    outcome: str
    error_code: str | None
    error_message: str | None
    processed: int | None = None
    failed: int | None = None
    summary: str | None = None
    traceback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "claim_version": self.claim_version,
            "worker_id": self.worker_id,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat(),
            "runtime_ms": self.runtime_ms,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "processed": self.processed,
            "failed": self.failed,
            "summary": self.summary,
            "traceback": self.traceback,
        }


@dataclass(frozen=True, slots=True)
class Artifact:
    """A typed output of a job (for example ``ingest_batch_result``)."""

    artifact_type: str
    payload: Any = None
    ref: str | None = None
    job_id: int | None = None
    created_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "artifact_type": self.artifact_type,
            "ref": self.ref,
            "payload": self.payload,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True, slots=True)
class RequeueResult:
    """What ``requeue`` did: the job afterwards, whether it was left alone (running), and
    whether idle workers were woken (a notification sent, or a worker of this process)."""

    job: Job
    idempotent: bool
    woke_workers: bool = False


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One row of ``durq_workers``: a worker process, live or gone.

    ``alive`` means not stopped and heard from within three heartbeats; ``running`` is how
    many jobs it holds now; ``processed`` how many jobs it ran to an outcome since it
    started (a job released at shutdown, its attempt not spent, is not counted).
    """

    id: str
    hostname: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    alive: bool
    running: int = 0
    processed: int = 0
    heartbeat_seconds: float = 10.0

    @property
    def status(self) -> str:
        """``alive``, ``stopped`` (exited cleanly) or ``dead`` (went silent)."""
        if self.alive:
            return "alive"
        return "stopped" if self.stopped_at is not None else "dead"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "hostname": self.hostname,
            "pid": self.pid,
            "queues": list(self.queues),
            "concurrency": self.concurrency,
            "started_at": self.started_at.isoformat(),
            "heartbeat_at": self.heartbeat_at.isoformat(),
            "stopped_at": self.stopped_at.isoformat() if self.stopped_at else None,
            "alive": self.alive,
            "status": self.status,
            "running": self.running,
            "processed": self.processed,
            "heartbeat_seconds": self.heartbeat_seconds,
        }


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """One row of ``durq_outbox``: a job's state change waiting for (or past) delivery.

    ``attempt`` counts delivery attempts, apart from the job's own execution attempts."""

    id: int
    event_id: str
    job_id: int
    owner: str | None
    url: str
    event_type: str
    payload: dict[str, Any]
    state: str
    attempt: int
    claim_version: int
    worker_id: str | None
    next_attempt_at: datetime
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "event_id": self.event_id,
            "sequence": self.id,
            "job_id": self.job_id,
            "type": self.event_type,
            "payload": self.payload,
            "state": self.state,
            "delivery_attempts": self.attempt,
            "claim_version": self.claim_version,
            "url": self.url,
            "next_attempt_at": ts(self.next_attempt_at),
            "created_at": ts(self.created_at),
            "delivered_at": ts(self.delivered_at),
            "last_status": self.last_status,
            "last_error": self.last_error,
        }


@dataclass(frozen=True, slots=True)
class SealedSecrets:
    """A job's secrets as stored: envelope-encrypted, never the plaintext."""

    job_id: int
    owner: str | None
    credential_version: int
    encrypted: str
    dek_wrapped: str
    kek_id: str
    encryption_version: int
    refresh_url: str | None = None
    refresh_attempts: int = 0
    max_refresh_attempts: int = 3

    def __repr__(self) -> str:  # ciphertext is not secret, but keep logs short and boring
        return (
            f"SealedSecrets(job_id={self.job_id}, kek_id={self.kek_id!r}, "
            f"credential_version={self.credential_version})"
        )


def nearest_rank(n: int, fraction: float) -> int:
    """0-based index of the nearest-rank percentile in an ascending list of ``n`` values."""
    return max(0, math.ceil(fraction * n) - 1)
