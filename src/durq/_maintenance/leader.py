"""A leader lease: one row in ``durq_leaders`` per role, held by renewing it.

Whoever holds an unexpired row leads; anyone may take an expired one. A holder renews well
before expiry, so a healthy leader keeps the role and a dead one loses it after ``ttl``.
A process paused for longer than ``ttl`` may briefly overlap with its successor: everything
a leader does is therefore also safe when two run it (see :mod:`durq._maintenance`).
"""

from __future__ import annotations

import logging
import time

from .._drivers import Driver

__all__ = ["LeaderLease"]

log = logging.getLogger("durq.maintenance")


class LeaderLease:
    def __init__(self, driver: Driver, name: str, holder: str, *, ttl: float = 10.0) -> None:
        self.driver = driver
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self._held_until = 0.0  # monotonic; we renew at two thirds of the lease
        self._next_try = 0.0

    @property
    def held(self) -> bool:
        return time.monotonic() < self._held_until

    def hold(self) -> bool:
        """Take or renew the role when due; True while this process leads. One write at most."""
        now = time.monotonic()
        if now < self._held_until - self.ttl / 3 or now < self._next_try:
            return self.held
        with self.driver.transaction() as ex:
            won = self.driver.leader_acquire(ex, self.name, self.holder, self.ttl)
        if won and not self.held:
            log.info("%s leads %r now", self.holder, self.name)
        self._held_until = now + self.ttl if won else 0.0
        # Followers look again at a third of the lease: a dead leader is replaced promptly.
        self._next_try = 0.0 if won else now + self.ttl / 3
        return won

    def release(self) -> None:
        """Give the role up at once (graceful shutdown), so another worker takes it now."""
        if self._held_until == 0.0:
            return
        self._held_until = 0.0
        with self.driver.transaction() as ex:
            self.driver.leader_release(ex, self.name, self.holder)

    def current(self) -> str | None:
        """Who leads, as the database sees it (None: nobody)."""
        with self.driver.read() as ex:
            return self.driver.leader_get(ex, self.name)
