"""One wire shape per type: the JSON the HTTP API answers with and ``durq … --json``
prints are the same pydantic models, so a script can switch between them freely."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from .types import Job, JobState, RequeueResult

__all__ = [
    "AlertOut",
    "ArtifactOut",
    "AttemptOut",
    "BreakerOut",
    "JobOut",
    "KeyOut",
    "QueueOut",
    "RequeueOut",
    "WorkerOut",
    "dump",
    "dump_queues",
    "requeue_view",
]

M = TypeVar("M", bound=BaseModel)


class JobOut(BaseModel):
    id: int
    queue: str
    task: str
    args: dict[str, Any]
    state: JobState
    stage: str | None
    attempt: int
    max_attempts: int
    claim_version: int
    worker_id: str | None
    priority: int
    run_at: datetime
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    created_by: str | None
    breaker_key: str | None = None
    concurrency_key: str | None = None
    last_error_code: str | None
    last_error: str | None
    result: Any = None


class AttemptOut(BaseModel):
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
    processed: int | None = Field(None, description="Run log: items the attempt processed")
    failed: int | None = Field(None, description="Run log: items that failed")
    summary: str | None = Field(None, description="Run log: the task's summary")
    traceback: str | None = None


class ArtifactOut(BaseModel):
    job_id: int | None
    artifact_type: str
    ref: str | None
    payload: Any = None
    created_at: datetime | None


class RequeueOut(BaseModel):
    """The operator's view of a job after a requeue."""

    id: int
    queue: str
    task: str
    state: JobState
    attempts: int
    max_attempts: int
    last_error_code: str | None
    updated_at: datetime
    finished_at: datetime | None
    idempotent: bool = Field(description="true when the job was running and left alone")
    enqueue_dispatched: bool = Field(
        description="true when the job was made ready and idle workers were woken"
    )


class QueueOut(BaseModel):
    name: str
    counts: dict[str, int]
    ready: int
    oldest_age_seconds: float | None
    p95_age_seconds: float | None
    paused: bool
    degraded: bool


class WorkerOut(BaseModel):
    id: str
    hostname: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    alive: bool
    status: Literal["alive", "stopped", "dead"]
    running: int = Field(description="Jobs it holds now")
    processed: int = Field(description="Outcomes it wrote since it started")
    heartbeat_seconds: float


class BreakerOut(BaseModel):
    key: str
    state: Literal["closed", "open", "half_open"]
    consecutive_failures: int
    last_failure_at: datetime | None
    paused_until: datetime | None
    opened_count: int
    threshold: int
    pause_seconds: float


class AlertOut(BaseModel):
    id: int
    category: str
    severity: str
    key: str
    context: dict[str, Any]
    first_seen: datetime
    last_seen: datetime
    count: int
    state: Literal["open", "resolved"]
    resolved_at: datetime | None
    acked_at: datetime | None


class KeyOut(BaseModel):
    id: str
    owner: str
    role: str
    created_at: datetime | None
    last_used_at: datetime | None
    disabled_at: datetime | None


def dump(model: type[M], value: Any) -> dict[str, Any]:
    """``value`` (a durq type with ``to_dict``, or a mapping) in ``model``'s JSON shape."""
    data = value if isinstance(value, Mapping) else value.to_dict()
    return model.model_validate(data).model_dump(mode="json")


def dump_queues(stats: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``App.queue_stats()`` as a list of :class:`QueueOut`, by name."""
    return [dump(QueueOut, {"name": name, **stats[name]}) for name in sorted(stats)]


def requeue_view(result: RequeueResult) -> dict[str, Any]:
    """The operator's view of a job after a requeue (:class:`RequeueOut`)."""
    job: Job = result.job
    return dump(
        RequeueOut,
        {
            "id": job.id,
            "queue": job.queue,
            "task": job.task,
            "state": job.state,
            "attempts": job.attempt,
            "max_attempts": job.max_attempts,
            "last_error_code": job.last_error_code,
            "updated_at": job.updated_at,
            "finished_at": job.finished_at,
            "idempotent": result.idempotent,
            "enqueue_dispatched": result.woke_workers,
        },
    )


class EventOut(BaseModel):
    """One outbox event: a job's state change and its delivery."""

    event_id: str
    sequence: int = Field(description="Order of the job's events (ascending)")
    job_id: int
    type: str = Field(description="job.queued, job.running, job.stage, job.retry_wait, ...")
    payload: dict[str, Any]
    state: Literal["pending", "delivering", "delivered", "dead_letter"]
    delivery_attempts: int
    claim_version: int
    url: str
    next_attempt_at: datetime | None
    created_at: datetime | None
    delivered_at: datetime | None
    last_status: int | None
    last_error: str | None


class JobEventsOut(BaseModel):
    """A job's events and its three counters (execution, refresh, delivery)."""

    counters: dict[str, int]
    events: list[EventOut]
