"""The sync worker's core on durq: scheduling, the ``sync_pair`` task, and the seed's views.

:class:`CalendarSync` owns a ``durq.App``. Scheduling enqueues one job per window slice
under the breaker key ``<connector_id>:<pair_id>``; durq's breaker is the seed's
``connector_failure_stats`` (5 consecutive failures pause the pair for 30 minutes, the
claim skips its jobs, new schedules are refused, the first success after the pause resets
it), durq's attempt records are ``sync_job_logs``, and durq's alerts are ``alerts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import structlog

import durq

from .config import Settings
from .domain import (
    STATUS_BY_STATE,
    AlertView,
    FailureStats,
    SyncJob,
    SyncJobLog,
    alert_view,
    breaker_key,
    failure_stats,
    sync_job,
    sync_job_log,
)
from .executor import FakeProvider, ProviderError, SyncExecutor, SyncWindow

__all__ = [
    "IDEMPOTENCY_SCOPE",
    "QUEUE",
    "TASK",
    "CalendarSync",
    "PairPaused",
    "ScheduleOutcome",
    "ScheduleRequest",
]

log = structlog.get_logger("calendar_sync")

QUEUE = "calendar_sync"
TASK = "sync_pair"
IDEMPOTENCY_SCOPE = "calendar_sync:schedule"
#: Attempt outcomes in the words of ``sync_job_duration_seconds{outcome}``.
OUTCOMES = {"succeeded": "success", "failed": "failure"}


@dataclass(frozen=True)
class ScheduleRequest:
    pair_id: UUID
    window_start: datetime
    window_end: datetime
    connector_id: UUID | None = None
    priority: int = 0
    payload: dict[str, Any] = field(default_factory=dict)


class PairPaused(Exception):
    """The (connector, pair) is paused by its circuit breaker: nothing was scheduled."""

    def __init__(
        self, connector_id: str, pair_id: str, paused_until: str | None, alert: AlertView | None
    ) -> None:
        self.connector_id = connector_id
        self.pair_id = pair_id
        self.paused_until = paused_until
        self.alert = alert
        super().__init__(
            f"pair {pair_id} on connector {connector_id} is paused after repeated sync "
            f"failures until {paused_until}; schedule it again after the pause"
        )


@dataclass(frozen=True)
class ScheduleOutcome:
    """What the scheduler did for a batch of pairs: jobs scheduled, pairs skipped."""

    scheduled: list[SyncJob]
    skipped: list[FailureStats]


class CalendarSync:
    """The recipe's one object: its durq App, its executor and the seed's operations."""

    def __init__(self, settings: Settings, executor: SyncExecutor | None = None) -> None:
        self.settings = settings
        self.executor: SyncExecutor = executor or FakeProvider(
            failing_pairs=set(settings.failing_pairs), seconds_per_sync=settings.fake_sync_seconds
        )
        self.app = durq.App(settings.database_url)
        self.app.breakers["*"] = durq.BreakerRule(
            threshold=settings.breaker_threshold, pause=settings.breaker_pause_seconds
        )
        self.retry_policy = durq.Exponential(
            base=settings.backoff_base_seconds,
            factor=2.0,
            jitter=settings.backoff_jitter,
            cap=settings.backoff_cap_seconds,
        )
        self._register_task()
        self.app.add_job_metrics(
            durq.JobMetrics(
                tasks=(TASK,),
                jobs_total="sync_jobs_total",
                queue_depth="sync_jobs_queue_depth",
                duration="sync_job_duration_seconds",
                retries="sync_job_retries_total",
                state_label="status",
                state_names=STATUS_BY_STATE,
                outcome_names=OUTCOMES,
                arg_labels=("connector_id",),
            )
        )

    def _register_task(self) -> None:
        @self.app.task(
            name=TASK,
            queue=QUEUE,
            retry=self.retry_policy,
            max_attempts=self.settings.max_retries + 1,
            pass_context=True,
        )
        def sync_pair(
            ctx: durq.JobContext,
            pair_id: str,
            connector_id: str,
            window_start: str,
            window_end: str,
            payload: dict[str, Any],
        ) -> dict[str, Any]:
            window = SyncWindow(
                job_id=ctx.job.id,
                pair_id=pair_id,
                connector_id=connector_id,
                window_start=datetime.fromisoformat(window_start),
                window_end=datetime.fromisoformat(window_end),
                payload=payload,
                attempt=ctx.job.attempt,
            )
            return self._sync(ctx, window)

    def _sync(self, ctx: durq.JobContext, window: SyncWindow) -> dict[str, Any]:
        bound = log.bind(
            job_id=window.job_id,
            pair_id=window.pair_id,
            connector_id=window.connector_id,
            attempt=window.attempt,
        )
        try:
            result = self.executor.sync(window)
        except ProviderError as exc:
            ctx.report(processed=exc.processed, failed=exc.failed, summary=exc.summary)
            bound.warning("sync_failed", error=exc.summary)
            raise
        except Exception as exc:
            # The message of an unknown error may carry credentials: only its type is kept.
            ctx.report(processed=0, failed=0, summary=f"sync failed: {type(exc).__name__}")
            bound.warning("sync_failed", error=type(exc).__name__)
            raise
        ctx.report(processed=result.processed, failed=result.failed, summary=result.summary)
        bound.info("sync_completed", processed=result.processed, failed=result.failed)
        return {"processed": result.processed, "failed": result.failed}

    def migrate(self) -> None:
        self.app.migrate()

    def close(self) -> None:
        self.app.close()

    # ---- scheduling ------------------------------------------------------------------

    def schedule(
        self, request: ScheduleRequest, *, idempotency_key: str | None = None
    ) -> list[SyncJob]:
        """Enqueue the window as ``pending`` jobs (one per slice of at most
        ``max_window_seconds``); ``PairPaused`` if the pair's breaker is open. The same
        ``idempotency_key`` with the same request returns the jobs it made the first time
        (``durq.IdempotencyConflict`` with another request)."""
        connector = str(request.connector_id or self.settings.default_connector_id)
        pair = str(request.pair_id)
        items = [
            durq.EnqueueRequest(
                TASK,
                {
                    "pair_id": pair,
                    "connector_id": connector,
                    "window_start": start.isoformat(),
                    "window_end": end.isoformat(),
                    "payload": request.payload,
                },
                priority=request.priority,
                breaker_key=breaker_key(connector, pair),
                idempotency_key=None if idempotency_key is None else f"{idempotency_key}#{i}",
                idempotency_scope=IDEMPOTENCY_SCOPE,
            )
            for i, (start, end) in enumerate(self._slices(request.window_start, request.window_end))
        ]
        try:
            jobs = self.app.enqueue_many(items)
        except durq.BreakerOpen as exc:
            alert = alert_view(exc.alert) if exc.alert else None
            raise PairPaused(connector, pair, exc.paused_until, alert) from None
        log.info("sync_scheduled", pair_id=pair, connector_id=connector, jobs=[j.id for j in jobs])
        return [sync_job(j) for j in jobs]

    def _slices(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        step = timedelta(seconds=self.settings.max_window_seconds)
        out = []
        while start < end:
            out.append((start, min(start + step, end)))
            start += step
        return out

    def schedule_pairs(
        self, pairs: Sequence[tuple[UUID, UUID | None]], start: datetime, end: datetime
    ) -> ScheduleOutcome:
        """The scheduler's round: one window for each ``(pair_id, connector_id)``; a paused
        pair is skipped (and reported), never an error."""
        scheduled: list[SyncJob] = []
        skipped: list[FailureStats] = []
        for pair_id, connector_id in pairs:
            request = ScheduleRequest(pair_id, start, end, connector_id=connector_id)
            try:
                scheduled += self.schedule(request)
            except PairPaused as exc:
                stats = self.failure_stats_for(exc.connector_id, exc.pair_id)
                if stats is not None:
                    skipped.append(stats)
                log.info("sync_skipped_paused_pair", pair_id=exc.pair_id, until=exc.paused_until)
        return ScheduleOutcome(scheduled, skipped)

    # ---- the seed's views ------------------------------------------------------------

    def _sync_job(self, job_id: int) -> durq.Job:
        job = self.app.get_job(job_id)
        if job.task != TASK:  # another application's job in the same database
            raise durq.JobNotFound(job_id)
        return job

    def job(self, job_id: int) -> SyncJob:
        return sync_job(self._sync_job(job_id))

    def jobs(self, *, status: str | None = None, limit: int = 100) -> list[SyncJob]:
        """Newest first; ``status`` in the seed's words (``pending``, ``failed``, …)."""
        states = [s for s, name in STATUS_BY_STATE.items() if status in (None, name)]
        if not states:
            raise durq.ValidationError(
                f"unknown status {status!r}; use one of: {', '.join(STATUS_BY_STATE.values())}"
            )
        found = self.app.list_jobs(task=TASK, state=states, limit=limit)
        return [sync_job(j) for j in found]

    def logs(self, job_id: int) -> list[SyncJobLog]:
        job = self._sync_job(job_id)
        return [sync_job_log(job, a) for a in self.app.attempts(job_id)]

    def failure_stats(self) -> list[FailureStats]:
        found = (failure_stats(b) for b in self.app.list_breakers())
        return [s for s in found if s is not None]

    def failure_stats_for(self, connector_id: str, pair_id: str) -> FailureStats | None:
        try:
            return failure_stats(self.app.get_breaker(breaker_key(connector_id, pair_id)))
        except durq.KeyNotFound:
            return None

    def alerts(self, *, state: str = "open") -> list[AlertView]:
        return [alert_view(a) for a in self.app.list_alerts(state=state)]
