"""A periodic schedule: enqueue a task at every tick of a cron expression (UTC).

Run by the maintenance leader (``durq._maintenance.periodic``); each tick is enqueued with
the idempotency key ``<name>@<tick time>`` in the scope :data:`SCOPE`, so it runs once
however many processes think they lead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from croniter import croniter

from ..errors import ConfigurationError

__all__ = ["MAX_TICKS_PER_ROUND", "SCOPE", "PeriodicTask"]

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
    #: Missed ticks enqueued when a leader starts (first start, after downtime, after a
    #: leader change): 0 resumes with the next tick; N enqueues the N latest missed ones.
    catch_up: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.cron, str) or not croniter.is_valid(self.cron):
            raise ConfigurationError(
                f"periodic task {self.name!r}: invalid cron expression {self.cron!r}; use five "
                "fields (minute hour day month weekday) such as '*/5 * * * *', or six with "
                "seconds last such as '* * * * * */10'"
            )
        if isinstance(self.catch_up, bool) or not isinstance(self.catch_up, int):
            raise ConfigurationError(f"periodic task {self.name!r}: catch_up must be an int")
        if not 0 <= self.catch_up <= MAX_TICKS_PER_ROUND:
            raise ConfigurationError(
                f"periodic task {self.name!r}: catch_up must be 0 to {MAX_TICKS_PER_ROUND} "
                f"missed ticks, got {self.catch_up}"
            )

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

    def missed(self, now: datetime) -> list[datetime]:
        """The ``catch_up`` latest ticks at or before ``now``, oldest first."""
        it = croniter(self.cron, now.astimezone(UTC))
        found = [it.get_prev(datetime) for _ in range(self.catch_up)]
        return sorted(found)

    def next_tick(self, after: datetime) -> datetime:
        tick: datetime = croniter(self.cron, after.astimezone(UTC)).get_next(datetime)
        return tick

    def key(self, tick: datetime) -> str:
        return f"{self.name}@{tick.astimezone(UTC).isoformat()}"

    @property
    def key_ttl(self) -> float:
        # The key must outlive the window in which a tick may still be enqueued: the
        # catch-up ticks a new leader may look back to, and an hour at least.
        now = datetime.now(UTC)
        first = self.next_tick(now)
        interval = (self.next_tick(first) - first).total_seconds()
        return max(3600.0, 2 * (self.catch_up + 1) * interval)
