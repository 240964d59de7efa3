"""Typed queries for the dashboard: live counts, the per-minute history, dead-letter groups.

Each read touches only what it reports: waiting and running jobs through the state index,
the small ``durq_stats_minutes`` table, or dead-lettered jobs through their own index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .rows import RowCodec
from .sql import Executor

__all__ = ["DeadLetterGroup", "InsightQueries", "MinuteStats"]


@dataclass(frozen=True, slots=True)
class MinuteStats:
    """Attempts of one queue that finished in one minute."""

    minute: int
    queue: str
    succeeded: int
    failed: int
    dead_letter: int
    pickup_p50_ms: int | None
    pickup_p95_ms: int | None


@dataclass(frozen=True, slots=True)
class DeadLetterGroup:
    task: str
    error_code: str | None
    count: int
    latest_id: int
    latest_at: datetime | None


class InsightQueries(RowCodec):
    def queue_live_counts(self, ex: Executor) -> list[tuple[str, str, int]]:
        """``(queue, state, count)`` of queued, retry_wait and running jobs only."""
        rows = ex.run("queue_live_counts", {})
        return [(r["queue"], r["state"], int(r["n"])) for r in rows]

    def stats_rollup(self, ex: Executor, since: float) -> list[MinuteStats]:
        """Attempts finished at or after ``since`` (epoch seconds), counted per minute and
        queue by the database, with their nearest-rank p50/p95 pickup latency."""
        rows = ex.run("stats_rollup", {"since": since})
        return [
            MinuteStats(
                minute=int(r["minute"]),
                queue=r["queue"],
                succeeded=int(r["succeeded"]),
                failed=int(r["failed"]),
                dead_letter=int(r["dead_letter"]),
                pickup_p50_ms=_ms(r["pickup_p50_ms"]),
                pickup_p95_ms=_ms(r["pickup_p95_ms"]),
            )
            for r in rows
        ]

    def stats_minute_upsert(self, ex: Executor, rows: Sequence[MinuteStats]) -> None:
        """Write each (minute, queue) row, replacing what an earlier rollup wrote for it."""
        for row in rows:
            ex.run(
                "stats_minute_upsert",
                {
                    "minute": row.minute,
                    "queue": row.queue,
                    "succeeded": row.succeeded,
                    "failed": row.failed,
                    "dead_letter": row.dead_letter,
                    "pickup_p50_ms": row.pickup_p50_ms,
                    "pickup_p95_ms": row.pickup_p95_ms,
                },
            )

    def stats_minutes_since(self, ex: Executor, since: int) -> list[MinuteStats]:
        rows = ex.run("stats_minutes_since", {"since": since})
        return [
            MinuteStats(
                minute=int(r["minute"]),
                queue=r["queue"],
                succeeded=int(r["succeeded"]),
                failed=int(r["failed"]),
                dead_letter=int(r["dead_letter"]),
                pickup_p50_ms=None if r["pickup_p50_ms"] is None else int(r["pickup_p50_ms"]),
                pickup_p95_ms=None if r["pickup_p95_ms"] is None else int(r["pickup_p95_ms"]),
            )
            for r in rows
        ]

    def stats_minutes_prune(self, ex: Executor, before: int) -> None:
        ex.run("stats_minutes_prune", {"before": before})

    def dead_letter_groups(
        self, ex: Executor, *, created_by: str | None, limit: int
    ) -> list[DeadLetterGroup]:
        rows = ex.run("dead_letter_groups", {"created_by": created_by, "limit": limit})
        return [
            DeadLetterGroup(
                task=r["task"],
                error_code=r["error_code"],
                count=int(r["n"]),
                latest_id=int(r["latest_id"]),
                latest_at=self.ts_out(r["latest_at"]),
            )
            for r in rows
        ]

    def dead_letter_ids(
        self,
        ex: Executor,
        *,
        task: str,
        error_code: str | None,
        created_by: str | None,
        limit: int,
    ) -> list[int]:
        params = {"task": task, "error_code": error_code, "created_by": created_by, "limit": limit}
        return [int(r["id"]) for r in ex.run("dead_letter_ids", params)]


def _ms(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
