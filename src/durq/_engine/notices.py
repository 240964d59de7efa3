"""Wake-ups for single enqueues on PostgreSQL, debounced per process.

PostgreSQL takes one lock for the whole server when it commits a transaction that sent a
NOTIFY, so enqueuers that each notify commit one after another (pgbench, 8 clients, 2
cores: 5,200 single inserts/s without NOTIFY, 1,900 to 2,600 with; docs/benchmarks.md).
Idle workers need a wake-up per burst, not per job. So per queue, the first single
enqueue in a window sends its NOTIFY in its own statement (the leading edge: an enqueue
after a quiet spell wakes workers at its commit, as before); the enqueues that follow
within ``WINDOW`` send none, and once the window is over one NOTIFY goes out for all of
them (the trailing edge), sent after their commits, so no job waits for a worker's poll.

A trailing NOTIFY that cannot be sent (the database is away) is logged; the workers'
polling still finds the jobs.
"""

from __future__ import annotations

import logging
import threading
import time

from .._drivers import Driver

__all__ = ["WINDOW", "Notices"]

log = logging.getLogger("durq.enqueue")

#: Enqueues of one queue this close together share one NOTIFY.
WINDOW = 0.005


class Notices:
    """One per ``App``: which queues were notified lately, and the trailing NOTIFYs owed."""

    def __init__(self, driver: Driver, window: float | None = None) -> None:
        self.driver = driver
        self.window = WINDOW if window is None else window
        #: NOTIFYs sent (in an insert, or trailing), for tests and operators.
        self.sent = 0
        self._last: dict[str, float] = {}  # queue -> when its last NOTIFY was sent
        self._owed: set[str] = set()
        self._due = 0.0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def lead(self, queue: str) -> bool:
        """Should the insert into ``queue`` about to run send its own NOTIFY? If not, the
        caller calls :meth:`owe` once its insert committed."""
        now = time.monotonic()
        with self._cond:
            last = self._last.get(queue)
            if last is not None and now - last < self.window:
                return False
            self._last[queue] = now
            self.sent += 1
            return True

    def owe(self, queue: str) -> None:
        """An insert into ``queue`` committed without a NOTIFY: one goes out at the end of
        the current window."""
        with self._cond:
            if self._closed:
                return
            if not self._owed:
                self._due = self._last.get(queue, time.monotonic()) + self.window
            self._owed.add(queue)
            # None yet, or gone (this process was forked from the one that started it).
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="durq-notices", daemon=True)
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        """Send what is owed, then stop."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._owed and not self._closed:
                    self._cond.wait()
                if not self._owed:
                    return  # closed, nothing owed
                delay = self._due - time.monotonic()
                if delay > 0 and not self._closed:
                    self._cond.wait(delay)
                    continue
                queues, self._owed = sorted(self._owed), set()
                now = time.monotonic()
                for queue in queues:
                    self._last[queue] = now
                self.sent += len(queues)
            self._send(queues)

    def _send(self, queues: list[str]) -> None:
        try:
            with self.driver.autocommit() as ex:
                for queue in queues:
                    self.driver.notify_queue(ex, queue)
        except Exception as exc:  # workers still poll: a late job, never a lost one
            log.warning(
                "could not wake workers of %s after enqueues (%s); they will find the jobs "
                "at their next poll",
                ", ".join(queues),
                exc,
            )
