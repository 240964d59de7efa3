"""How a long-lived component lives through the database going away.

Each component of a worker (claims, heartbeats, outcome writes, deliveries, maintenance)
keeps one :class:`Outage`. A transient failure (the connection dropped, the server
restarts, SQLite stays locked past its busy timeout) is retried after a short backoff
capped at :data:`RETRY_MAX`, so work resumes about a second after the database is back.
The component logs one WARNING when its database goes away and one when it is back,
however many operations failed in between; an error that is not transient is logged
every time, since retrying will not fix it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from .._drivers import Driver

__all__ = ["RETRY_FIRST", "RETRY_MAX", "Outage", "brief", "retry_transient"]

T = TypeVar("T")

#: The first pause after a transient failure, doubled per failure up to ``RETRY_MAX``.
RETRY_FIRST = 0.05
#: The longest pause between tries: recovery within about a second of the database.
RETRY_MAX = 1.0
#: The longest pause after an error that is not transient (logged at every try).
RETRY_MAX_OTHER = 5.0


def brief(exc: BaseException) -> str:
    """The first line of an error, with its type: enough for a log line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class Outage:
    """One component's view of the database: down since when, and the next pause."""

    def __init__(
        self,
        component: str,
        driver: Driver,
        logger: logging.Logger,
        *,
        first: float = RETRY_FIRST,
        cap: float = RETRY_MAX,
    ) -> None:
        self.component = component
        self.driver = driver
        self.log = logger
        self.first = first
        self.cap = cap
        #: Monotonic time the current outage began (None: the database answers).
        self.since: float | None = None
        self.failures = 0
        #: Outages seen so far (tests and diagnostics read it).
        self.outages = 0

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException, doing: str = "") -> float:
        """Record a failure; returns the seconds to wait before the next try."""
        self.failures += 1
        delay = self.first * 2.0 ** min(self.failures - 1, 30)
        what = f" {doing}" if doing else ""
        if not self.driver.is_transient(exc):
            delay = min(delay, max(self.cap, RETRY_MAX_OTHER))
            self.log.warning(
                "%s:%s failed (%s); retrying in %.2fs", self.component, what, brief(exc), delay
            )
            return delay
        delay = min(delay, self.cap)
        if self.since is None:
            self.since = time.monotonic()
            self.outages += 1
            self.log.warning(
                "%s: the database is unreachable (%s); retrying every %gs at most until it is back",
                self.component,
                brief(exc),
                self.cap,
            )
        return delay

    def ok(self) -> None:
        """Record a success: ends an outage (logged once) and resets the backoff."""
        self.failures = 0
        if self.since is not None:
            down_for = time.monotonic() - self.since
            self.log.warning("%s: the database is back after %.1fs", self.component, down_for)
            self.since = None


def retry_transient(
    driver: Driver, fn: Callable[[], T], *, timeout: float, cap: float = RETRY_MAX
) -> T:
    """``fn()``, tried again on transient errors for up to ``timeout`` seconds (for
    bookkeeping that must land, e.g. marking a worker stopped after a restart)."""
    deadline = time.monotonic() + timeout
    delay = RETRY_FIRST
    while True:
        try:
            return fn()
        except Exception as exc:
            if not driver.is_transient(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, cap)
