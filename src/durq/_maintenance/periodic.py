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
from datetime import UTC, datetime, timedelta

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
    """Enqueue every tick due in the catch-up window that is not enqueued yet.

    ``done`` (name → last tick handled) lets a long-running leader skip ticks it already
    enqueued without asking the database; the idempotency key is what guarantees once.
    Returns the jobs this call created.
    """
    now = now or datetime.now(UTC)
    created: list[Job] = []
    for periodic in schedules:
        after = now - timedelta(seconds=periodic.catchup)
        if done is not None and periodic.name in done:
            after = max(after, done[periodic.name])
        for tick in periodic.ticks(after, now):
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
