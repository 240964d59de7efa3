"""Seed 004's vocabulary over durq's: sync jobs, run logs, failure stats and alerts.

A ``sync_jobs`` row is a durq job of task ``sync_pair``; the other tables are views over
what durq stores (attempt records, breakers, alerts), so nothing is written twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import durq

__all__ = [
    "ALERT_CATEGORIES",
    "STATUS_BY_STATE",
    "AlertView",
    "FailureStats",
    "SyncJob",
    "SyncJobLog",
    "alert_view",
    "breaker_key",
    "failure_stats",
    "split_breaker_key",
    "sync_job",
    "sync_job_log",
]

#: durq's states in the seed's words (``sync_job_status``); durq's ``cancelled`` keeps its
#: name (the seed has no cancel).
STATUS_BY_STATE = {
    "queued": "pending",
    "running": "in_progress",
    "retry_wait": "retrying",
    "succeeded": "completed",
    "dead_letter": "failed",
    "cancelled": "cancelled",
}

#: durq's alert categories in the seed's words.
ALERT_CATEGORIES = {
    "circuit_breaker": "sync_circuit_breaker",
    "dead_letter": "sync_job_failed",
}


def breaker_key(connector_id: str, pair_id: str) -> str:
    """The durq breaker key of one (connector, pair): ``<connector_id>:<pair_id>``."""
    return f"{connector_id}:{pair_id}"


def split_breaker_key(key: str) -> tuple[str, str] | None:
    connector_id, sep, pair_id = key.partition(":")
    return (connector_id, pair_id) if sep and connector_id and pair_id else None


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class SyncJob:
    """One ``sync_jobs`` row."""

    id: int
    pair_id: str
    connector_id: str
    window_start: str
    window_end: str
    payload: dict[str, Any]
    status: str
    priority: int
    retry_count: int
    max_retries: int
    next_run_at: datetime | None
    last_error: str | None
    created_at: datetime | None
    updated_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pairId": self.pair_id,
            "connectorId": self.connector_id,
            "window": {"start": self.window_start, "end": self.window_end},
            "payload": self.payload,
            "status": self.status,
            "priority": self.priority,
            "retryCount": self.retry_count,
            "maxRetries": self.max_retries,
            "nextRunAt": _ts(self.next_run_at),
            "lastError": self.last_error,
            "createdAt": _ts(self.created_at),
            "updatedAt": _ts(self.updated_at),
        }


def sync_job(job: durq.Job) -> SyncJob:
    """A durq job as a ``sync_jobs`` row. ``retry_count`` counts the failures that were
    retried: a running attempt is not one yet, and the failure that ends a job is not."""
    state = str(job.state)
    retried = job.attempt if state in ("queued", "retry_wait") else max(job.attempt - 1, 0)
    waiting = state in ("queued", "retry_wait")
    args = job.args
    return SyncJob(
        id=job.id,
        pair_id=args["pair_id"],
        connector_id=args["connector_id"],
        window_start=args["window_start"],
        window_end=args["window_end"],
        payload=args.get("payload") or {},
        status=STATUS_BY_STATE[state],
        priority=job.priority,
        retry_count=retried,
        max_retries=job.max_attempts - 1,
        next_run_at=job.run_at if waiting else None,
        last_error=job.last_error,
        created_at=job.created_at,
        updated_at=job.updated_at,
    )


@dataclass(frozen=True)
class SyncJobLog:
    """One ``sync_job_logs`` row: an attempt's run log."""

    job_id: int
    pair_id: str
    connector_id: str
    attempt: int
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime
    processed_events: int | None
    failed_events: int | None
    outcome: str
    error_summary: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "pairId": self.pair_id,
            "connectorId": self.connector_id,
            "attempt": self.attempt,
            "workerId": self.worker_id,
            "startedAt": _ts(self.started_at),
            "finishedAt": _ts(self.finished_at),
            "processedEvents": self.processed_events,
            "failedEvents": self.failed_events,
            "outcome": self.outcome,
            "errorSummary": self.error_summary,
        }


def sync_job_log(job: durq.Job, attempt: durq.Attempt) -> SyncJobLog:
    return SyncJobLog(
        job_id=job.id,
        pair_id=job.args["pair_id"],
        connector_id=job.args["connector_id"],
        attempt=attempt.attempt,
        worker_id=attempt.worker_id,
        started_at=attempt.started_at,
        finished_at=attempt.finished_at,
        processed_events=attempt.processed,
        failed_events=attempt.failed,
        outcome=attempt.outcome,
        error_summary=None if attempt.outcome == "succeeded" else attempt.summary,
    )


@dataclass(frozen=True)
class FailureStats:
    """One ``connector_failure_stats`` row: durq's breaker of one (connector, pair)."""

    connector_id: str
    pair_id: str
    consecutive_failures: int
    last_failure_at: datetime | None
    paused_until: datetime | None
    state: str

    @property
    def paused(self) -> bool:
        return self.state == "open"

    def to_dict(self) -> dict[str, Any]:
        return {
            "connectorId": self.connector_id,
            "pairId": self.pair_id,
            "consecutiveFailures": self.consecutive_failures,
            "lastFailureAt": _ts(self.last_failure_at),
            "pausedUntil": _ts(self.paused_until),
            "state": self.state,
        }


def failure_stats(breaker: durq.Breaker) -> FailureStats | None:
    parts = split_breaker_key(breaker.key)
    if parts is None:
        return None
    return FailureStats(
        connector_id=parts[0],
        pair_id=parts[1],
        consecutive_failures=breaker.consecutive_failures,
        last_failure_at=breaker.last_failure_at,
        paused_until=breaker.paused_until,
        state=breaker.state,
    )


@dataclass(frozen=True)
class AlertView:
    """One ``alerts`` row in the seed's words."""

    id: int
    category: str
    severity: str
    connector_id: str | None
    pair_id: str | None
    context: dict[str, Any]
    count: int
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "severity": self.severity,
            "connectorId": self.connector_id,
            "pairId": self.pair_id,
            "context": self.context,
            "count": self.count,
            "firstSeen": _ts(self.first_seen),
            "lastSeen": _ts(self.last_seen),
            "resolvedAt": _ts(self.resolved_at),
            "state": "resolved" if self.resolved_at else "open",
        }


def alert_view(alert: dict[str, Any] | durq.Alert) -> AlertView:
    data = alert.to_dict() if isinstance(alert, durq.Alert) else alert
    parts = split_breaker_key(data["key"]) if data["category"] == "circuit_breaker" else None
    return AlertView(
        id=int(data["id"]),
        category=ALERT_CATEGORIES.get(data["category"], data["category"]),
        severity=data["severity"],
        connector_id=parts[0] if parts else None,
        pair_id=parts[1] if parts else None,
        context=dict(data.get("context") or {}),
        count=int(data["count"]),
        first_seen=_dt(data["first_seen"]),
        last_seen=_dt(data["last_seen"]),
        resolved_at=_dt(data["resolved_at"]) if data.get("resolved_at") else None,
    )


def _dt(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)
