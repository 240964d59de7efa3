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

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from croniter import croniter

from ..errors import ConfigurationError, JobNotFound
from ..types import Job

if TYPE_CHECKING:
    from ..app import App

__all__ = ["SCOPE", "PeriodicTask", "run_once", "seconds_until_next_tick"]

SCOPE = "periodic"
#: Never enqueue more than this many missed ticks of one schedule in one round.
MAX_TICKS_PER_ROUND = 100


@dataclass(frozen=True)
class PeriodicTask:
    """One schedule: enqueue ``task`` with ``args`` at every tick of ``cron``."""

    name: str
    task: str
    cron: str
    args: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    catchup: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.cron, str) or not croniter.is_valid(self.cron):
            raise ConfigurationError(
                f"periodic task {self.name!r}: invalid cron expression {self.cron!r}; use five "
                "fields (minute hour day month weekday) such as '*/5 * * * *', or six with "
                "seconds last such as '* * * * * */10'"
            )
        if not self.catchup >= 0:
            raise ConfigurationError(f"periodic task {self.name!r}: catchup must be >= 0 seconds")

    def ticks(self, after: datetime, until: datetime) -> list[datetime]:
        """The ticks ``t`` with ``after < t <= until``, oldest first (at most a bounded few)."""
        it = croniter(self.cron, after.astimezone(UTC))
        found: list[datetime] = []
        while len(found) < MAX_TICKS_PER_ROUND:
            tick = it.get_next(datetime)
            if tick > until:
                break
            found.append(tick)
        return found

    def next_tick(self, after: datetime) -> datetime:
        tick: datetime = croniter(self.cron, after.astimezone(UTC)).get_next(datetime)
        return tick

    def key(self, tick: datetime) -> str:
        return f"{self.name}@{tick.astimezone(UTC).isoformat()}"

    @property
    def key_ttl(self) -> float:
        # The key must outlive the window in which a tick may still be enqueued.
        return max(2 * self.catchup, 3600.0)


def run_once(
    app: App, *, now: datetime | None = None, done: dict[str, datetime] | None = None
) -> list[Job]:
    """Enqueue every tick due in the catch-up window that is not enqueued yet.

    ``done`` (name → last tick handled) lets a long-running leader skip ticks it already
    enqueued without asking the database; the idempotency key is what guarantees once.
    Returns the jobs this call created.
    """
    now = now or datetime.now(UTC)
    created: list[Job] = []
    for periodic in app.periodic_tasks:
        assert isinstance(periodic, PeriodicTask)
        after = now - timedelta(seconds=periodic.catchup)
        if done is not None and periodic.name in done:
            after = max(after, done[periodic.name])
        for tick in periodic.ticks(after, now):
            new = app.build(
                periodic.task,
                periodic.args,
                queue=periodic.queue,
                run_at=tick,
                idempotency_key=periodic.key(tick),
                idempotency_scope=SCOPE,
                idempotency_ttl=periodic.key_ttl,
            )
            try:
                job, was_created = app.insert(new)
            except JobNotFound:  # this tick's job already ran and was pruned
                was_created = False
            if was_created:
                created.append(job)
            if done is not None:
                done[periodic.name] = tick
    return created


def seconds_until_next_tick(app: App, now: datetime | None = None) -> float | None:
    """Seconds until the soonest tick of any schedule (None: no periodic tasks)."""
    if not app.periodic_tasks:
        return None
    now = now or datetime.now(UTC)
    soonest: datetime = min(p.next_tick(now) for p in app.periodic_tasks)
    return max(0.0, (soonest - now).total_seconds())
