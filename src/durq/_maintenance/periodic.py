"""Periodic tasks: ``@app.periodic(cron="*/5 * * * *")`` enqueued once per tick.

Cron expressions are read in UTC: five fields (minute hour day month weekday), or six with
seconds as the last field (``"* * * * * */10"``: every ten seconds).

Exactly once per tick, however many workers run: the leader enqueues each tick with the
idempotency key ``<name>@<tick time>`` in the scope ``periodic``, so if two processes ever
both think they lead, the second enqueue returns the first job instead of a new one. A tick
missed by less than ``catchup`` seconds (every worker was down, the leader changed) is still
enqueued when a leader comes back; older ticks are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from .._engine.schedule import PeriodicTask
from ..errors import JobNotFound
from ..types import Job

__all__ = ["EnqueueTick", "run_once", "seconds_until_next_tick"]

#: Enqueues one tick of a schedule (idempotently): ``(job, created)``.
EnqueueTick = Callable[[PeriodicTask, datetime], tuple[Job, bool]]


def run_once(
    schedules: Sequence[PeriodicTask],
    enqueue_tick: EnqueueTick,
    *,
    now: datetime | None = None,
    done: dict[str, datetime] | None = None,
) -> list[Job]:
    """Enqueue the ticks that came due since the last round.

    ``done`` (name → last tick handled) is the leader's memory for its term. A schedule it
    has not handled yet this term (a first start, a restart after downtime, a new leader)
    never back-fills: only its ``catch_up`` latest missed ticks are enqueued (none by
    default), then every tick as it comes due. The idempotency key per tick is what
    guarantees once, even if two processes briefly both lead. Returns the jobs created.
    """
    now = now or datetime.now(UTC)
    created: list[Job] = []
    for periodic in schedules:
        if done is not None and periodic.name in done:
            due = periodic.ticks(done[periodic.name], now)
        else:
            due = periodic.missed(now)
            if done is not None:
                done[periodic.name] = now  # from here on, every tick as it comes due
        for tick in due:
            try:
                job, was_created = enqueue_tick(periodic, tick)
            except JobNotFound:  # this tick's job already ran and was pruned
                was_created = False
            if was_created:
                created.append(job)
            if done is not None:
                done[periodic.name] = tick
    return created


def seconds_until_next_tick(
    schedules: Sequence[PeriodicTask], now: datetime | None = None
) -> float | None:
    """Seconds until the soonest tick of any schedule (None: no periodic tasks)."""
    if not schedules:
        return None
    now = now or datetime.now(UTC)
    soonest: datetime = min(p.next_tick(now) for p in schedules)
    return max(0.0, (soonest - now).total_seconds())
