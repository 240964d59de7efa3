"""Typed queries for keyed jobs: circuit breakers, per-key limits, alerts, run logs and
the guardrail window. One method per named block (``keys.sql`` in each dialect)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..keys import Alert, Breaker, LimitState
from .rows import RowCodec, epoch, json_in
from .sql import Executor

__all__ = ["KeyQueries"]


class KeyQueries(RowCodec):
    # ---- breakers --------------------------------------------------------------------

    def breaker_enter(
        self, ex: Executor, key: str, threshold: int, pause_seconds: float
    ) -> Breaker:
        """Record the rule in force for ``key`` and lock its row (an enqueue names it)."""
        params = {
            "key": key,
            "threshold": threshold,
            "pause_seconds": pause_seconds,
            "now": self.now_param(),
        }
        return self.breaker_from_row(ex.run("breaker_enter", params)[0])

    def breaker_lock(self, ex: Executor, key: str) -> Breaker | None:
        rows = ex.run("breaker_lock", {"key": key, "now": self.now_param()})
        return self.breaker_from_row(rows[0]) if rows else None

    def breaker_lock_many(self, ex: Executor, keys: Sequence[str]) -> dict[str, Breaker]:
        """Lock the breakers of ``keys`` that exist, in key order; by key."""
        return self._breakers_by_key(ex, "breaker_lock_many", keys)

    def breaker_read_many(self, ex: Executor, keys: Sequence[str]) -> dict[str, Breaker]:
        """The breakers of ``keys`` that exist, unlocked; by key."""
        return self._breakers_by_key(ex, "breaker_read_many", keys)

    def _breakers_by_key(self, ex: Executor, block: str, keys: Sequence[str]) -> dict[str, Breaker]:
        if not keys:
            return {}
        rows = ex.run(block, {"keys": self.list_param(sorted(keys)), "now": self.now_param()})
        return {r["key"]: self.breaker_from_row(r) for r in rows}

    def breaker_set(
        self,
        ex: Executor,
        key: str,
        *,
        failures: int,
        failed: bool,
        paused_until: datetime | None,
        held_until: datetime | None,
        opened: bool,
    ) -> Breaker | None:
        params = {
            "key": key,
            "failures": failures,
            "failed": failed,
            "paused_until": self.ts_param(paused_until),
            "held_until": self.ts_param(held_until),
            "opened": 1 if opened else 0,
            "now": self.now_param(),
        }
        rows = ex.run("breaker_set", params)
        return self.breaker_from_row(rows[0]) if rows else None

    def breaker_list(self, ex: Executor, *, failing_only: bool, limit: int) -> list[Breaker]:
        params = {"failing_only": failing_only, "limit": limit, "now": self.now_param()}
        return [self.breaker_from_row(r) for r in ex.run("breaker_list", params)]

    def breaker_totals(self, ex: Executor) -> tuple[int, int]:
        """``(open or half-open now, times any breaker opened)``."""
        row = ex.run("breaker_totals", {})[0]
        return int(row["open"] or 0), int(row["opened"] or 0)

    def job_park(self, ex: Executor, key: str, *, probe_at: datetime, held_until: datetime) -> int:
        """Hold ``key``'s waiting jobs: the first until ``probe_at``, the rest until
        ``held_until``. Returns how many."""
        params = {
            "key": key,
            "probe_at": self.ts_param(probe_at),
            "held_until": self.ts_param(held_until),
            "now": self.now_param(),
        }
        return len(ex.run("job_park", params))

    def job_release(self, ex: Executor, key: str, held_until: datetime) -> int:
        """Make ``key``'s parked jobs (due by ``held_until``) due now. Returns how many."""
        params = {"key": key, "held_until": self.ts_param(held_until), "now": self.now_param()}
        return len(ex.run("job_release", params))

    def breaker_from_row(self, r: Mapping[str, Any]) -> Breaker:
        return Breaker(
            key=r["key"],
            consecutive_failures=int(r["consecutive_failures"]),
            last_failure_at=self.ts_out(r["last_failure_at"]),
            paused_until=self.ts_out(r["paused_until"]),
            held_until=self.ts_out(r["held_until"]),
            opened_count=int(r["opened_count"]),
            threshold=int(r["threshold"]),
            pause_seconds=float(r["pause_seconds"]),
            now=self.ts_out(r["now"]) or epoch(),
        )

    # ---- limits ----------------------------------------------------------------------

    def limit_define(
        self, ex: Executor, key: str, *, concurrency: int | None, rate: int | None, per: float
    ) -> None:
        params = {"key": key, "concurrency": concurrency, "rate": rate, "rate_window": per}
        ex.run("limit_define", params)

    def limit_release(self, ex: Executor, key: str, n: int) -> None:
        ex.run("limit_release", {"key": key, "n": n})

    def limit_take(self, ex: Executor, key: str) -> None:
        ex.run("limit_take", {"key": key})

    def limit_list(self, ex: Executor, limit: int) -> list[LimitState]:
        return [
            LimitState(
                key=r["key"],
                concurrency=r["concurrency"],
                rate=r["rate"],
                per=float(r["rate_window"]),
                running=int(r["running"]),
                window_start=float(r["window_start"]),
                window_count=int(r["window_count"]),
            )
            for r in ex.run("limit_list", {"limit": limit})
        ]

    # ---- alerts ----------------------------------------------------------------------

    def alert_raise(
        self, ex: Executor, *, category: str, severity: str, key: str, context: Mapping[str, Any]
    ) -> Alert:
        """Open an alert, or count it again if one is open for ``(category, key)``."""
        params = {
            "category": category,
            "severity": severity,
            "key": key,
            "context": json.dumps(dict(context), sort_keys=True, default=str),
            "now": self.now_param(),
        }
        return self.alert_from_row(ex.run("alert_raise", params)[0])

    def alert_resolve(self, ex: Executor, *, category: str, key: str) -> Alert | None:
        params = {"category": category, "key": key, "now": self.now_param()}
        rows = ex.run("alert_resolve", params)
        return self.alert_from_row(rows[0]) if rows else None

    def alert_open(self, ex: Executor, *, category: str, key: str) -> Alert | None:
        rows = ex.run("alert_open", {"category": category, "key": key})
        return self.alert_from_row(rows[0]) if rows else None

    def alert_list(self, ex: Executor, *, state: str, limit: int) -> list[Alert]:
        rows = ex.run("alert_list", {"state": state, "limit": limit})
        return [self.alert_from_row(r) for r in rows]

    def alert_ack(self, ex: Executor, alert_id: int) -> Alert | None:
        rows = ex.run("alert_ack", {"id": alert_id, "now": self.now_param()})
        return self.alert_from_row(rows[0]) if rows else None

    def alert_from_row(self, r: Mapping[str, Any]) -> Alert:
        return Alert(
            id=int(r["id"]),
            category=r["category"],
            severity=r["severity"],
            key=r["key"],
            context=dict(json_in(r["context"]) or {}),
            first_seen=self.ts_out(r["first_seen"]) or epoch(),
            last_seen=self.ts_out(r["last_seen"]) or epoch(),
            count=int(r["count"]),
            resolved_at=self.ts_out(r["resolved_at"]),
            acked_at=self.ts_out(r["acked_at"]),
        )

    # ---- run logs, guardrail windows ---------------------------------------------------

    def attempt_report(
        self,
        ex: Executor,
        *,
        job_id: int,
        claim_version: int,
        report: Sequence[Any],
    ) -> None:
        """Store a run log with the attempt record of ``claim_version``. A succeeded
        attempt's record is on the job row: it is stored here, with the log."""
        processed, failed, summary = report
        params = {
            "job_id": job_id,
            "claim_version": claim_version,
            "processed": processed,
            "failed": failed,
            "summary": summary,
        }
        if not ex.run("attempt_report_success", params):
            ex.run("attempt_report", params)

    def queue_mark_degraded(self, ex: Executor, name: str) -> float:
        """Note the queue is over a guardrail; seconds it has been so without a break."""
        rows = ex.run("queue_mark_degraded", {"name": name, "now": self.now_param()})
        return max(0.0, float(rows[0]["degraded_for"] or 0.0))

    def queue_clear_degraded(self, ex: Executor, name: str) -> bool:
        """The queue is within its guardrails again; True if it was degraded."""
        return bool(ex.run("queue_clear_degraded", {"name": name, "now": self.now_param()}))
