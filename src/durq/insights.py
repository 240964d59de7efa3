"""``App``'s reads for dashboards: the overview of every queue, its last hour of history,
and dead letters grouped by task and error code.

The overview reads only jobs that wait or run (through indexes) and the per-minute rollup
that maintenance keeps (``durq_stats_minutes``), never the finished jobs, so it costs the
same however many finished jobs are retained.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ._drivers import Driver
from ._drivers.insights import DeadLetterGroup, MinuteStats
from .registry import TaskRegistry
from .types import JobState

__all__ = ["HISTORY_MINUTES", "DeadLetterGroup", "InsightOperations", "MinuteStats", "QueueView"]

HISTORY_MINUTES = 60
LIVE_STATES = (JobState.QUEUED, JobState.RETRY_WAIT, JobState.RUNNING)


@dataclass
class QueueView:
    """One queue on the overview."""

    name: str
    counts: dict[str, int] = field(default_factory=lambda: {str(s): 0 for s in LIVE_STATES})
    ready: int = 0
    oldest_age_seconds: float | None = None
    p95_age_seconds: float | None = None
    paused: bool = False
    degraded: bool = False
    #: The last hour, one entry per minute (oldest first; minutes without attempts are 0).
    history: list[MinuteStats] = field(default_factory=list)

    @property
    def finished_last_hour(self) -> dict[str, int]:
        return {
            "succeeded": sum(m.succeeded for m in self.history),
            "failed": sum(m.failed for m in self.history),
            "dead_letter": sum(m.dead_letter for m in self.history),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "counts": dict(self.counts),
            "ready": self.ready,
            "oldest_age_seconds": self.oldest_age_seconds,
            "p95_age_seconds": self.p95_age_seconds,
            "paused": self.paused,
            "degraded": self.degraded,
            "finished_last_hour": self.finished_last_hour,
        }


class InsightOperations(TaskRegistry):
    @property
    def driver(self) -> Driver:
        raise NotImplementedError

    def overview(self, *, now: float | None = None) -> list[QueueView]:
        """Every known queue, by name: live counts, ready ages, flags and the last hour.

        Four indexed reads: live counts, ready ages, queue flags, the minute rollup."""
        now = time.time() if now is None else now
        first_minute = int(now // 60) * 60 - (HISTORY_MINUTES - 1) * 60
        views: dict[str, QueueView] = {}

        def view(name: str) -> QueueView:
            return views.setdefault(name, QueueView(name))

        with self.driver.read() as ex:
            for queue, state, n in self.driver.queue_live_counts(ex):
                view(queue).counts[state] = n
            for queue, ready, oldest, p95 in self.driver.queue_ready_ages(ex):
                v = view(queue)
                v.ready, v.oldest_age_seconds = ready, max(0.0, oldest)
                v.p95_age_seconds = max(0.0, p95)
            for queue, paused in self.driver.queue_list(ex):
                view(queue).paused = paused
            minutes = self.driver.stats_minutes_since(ex, first_minute)
        by_queue: dict[str, dict[int, MinuteStats]] = {}
        for m in minutes:
            by_queue.setdefault(m.queue, {})[m.minute] = m
            view(m.queue)
        s = self.settings
        for name, v in views.items():
            known = by_queue.get(name, {})
            v.history = [
                known.get(minute) or MinuteStats(minute, name, 0, 0, 0, None, None)
                for minute in range(first_minute, first_minute + HISTORY_MINUTES * 60, 60)
            ]
            v.degraded = (v.p95_age_seconds or 0.0) > s.degraded_p95_age_seconds or (
                v.ready > s.degraded_ready_count
            )
        return [views[name] for name in sorted(views)]

    def dead_letter_groups(
        self, *, created_by: str | None = None, limit: int = 200
    ) -> list[DeadLetterGroup]:
        """Dead-lettered jobs grouped by (task, error code), the largest groups first."""
        with self.driver.read() as ex:
            return self.driver.dead_letter_groups(ex, created_by=created_by, limit=limit)

    def dead_letter_ids(
        self,
        task: str,
        error_code: str | None,
        *,
        created_by: str | None = None,
        limit: int = 1000,
    ) -> list[int]:
        """The ids of one group's dead-lettered jobs, newest first."""
        with self.driver.read() as ex:
            return self.driver.dead_letter_ids(
                ex, task=task, error_code=error_code, created_by=created_by, limit=limit
            )
