"""Wake-ups for an idle producer, so new jobs start without waiting for a poll tick.

* PostgreSQL: ``LISTEN durq_jobs`` on a dedicated autocommit connection. The enqueue path
  calls ``pg_notify('durq_jobs', queue)``; PostgreSQL folds identical notifications of one
  transaction, so a bulk enqueue wakes each worker once per queue, not once per job.
* SQLite: a Unix datagram socket per worker, registered beside the database file; after
  a commit that made jobs ready, ``App`` sends each registered worker the queue names
  (``durq._drivers.sqlite.wake``).
* Any backend, in one process: :func:`announce` — ``App`` calls it after it committed new
  jobs, and every producer of this process on the same database wakes. This is the
  wake-up path when listening is off (``listen_notify=False``, e.g. behind PgBouncer in
  transaction mode, where LISTEN does not work).

Polling (``poll_interval``) stays on in every mode: it is the fallback when a wake-up is
lost, the listening connection drops, or jobs are written by something other than durq.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable

from .._drivers import Driver
from .._drivers.base import Listener
from .._engine import wakeups

__all__ = ["Notifier"]

log = logging.getLogger("durq.worker")

#: Called with the reason of a wake-up ("notify", "local"); must be thread-safe.
WakeFn = Callable[[str], None]


class Notifier:
    """Calls ``wake(reason)`` when jobs may have arrived in one of ``queues``.

    ``mode`` is ``"listen"`` (PostgreSQL LISTEN/NOTIFY, SQLite's socket channel) or
    ``"local"`` (in-process signal only); both keep polling as the fallback.
    """

    #: How long the listening thread blocks before it checks whether to stop.
    LISTEN_SLICE = 0.25
    #: Pause before reconnecting a dropped LISTEN connection (polling covers the gap).
    RECONNECT_DELAY = 1.0

    def __init__(
        self,
        driver: Driver,
        queues: Iterable[str],
        wake: WakeFn,
        *,
        listen: bool,
        component: str = "job wake-ups",
    ) -> None:
        self.driver = driver
        self.component = component
        self.queues = frozenset(queues)
        self.wake = wake
        crosses = driver.capabilities.listen_notify or driver.capabilities.wake_after_commit
        self.mode = "listen" if listen and crosses else "local"
        #: Set while a LISTEN is in place (tests and `durq workers` diagnostics wait on it).
        self.listening = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        # In-process wake-ups in every mode: App.requeue and enqueue announce to them.
        wakeups.subscribe(self.driver.url, self._on_local)
        if self.mode == "local":
            return
        self._thread = threading.Thread(target=self._listen, name="durq-listen", daemon=True)
        self._thread.start()

    def stop(self, deadline: float | None = None) -> None:
        wakeups.unsubscribe(self.driver.url, self._on_local)
        if self.mode == "local":
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.LISTEN_SLICE * 8)

    def _on_local(self, queues: frozenset[str]) -> bool:
        if queues & self.queues:
            self.wake("local")
            return True
        return False

    def _listen(self) -> None:
        dropped = False
        while not self._stop.is_set():
            listener: Listener | None = None
            try:
                listener = self.driver.listen()
                self.listening.set()
                if dropped:  # notifications sent while we were away are lost: look now
                    log.warning("%s: LISTEN durq_jobs is back", self.component)
                    dropped = False
                    self.wake("poll")
                while not self._stop.is_set():
                    for queue in listener.notifications(self.LISTEN_SLICE):
                        if queue in self.queues:
                            self.wake("notify")
            except Exception as exc:  # a dropped connection must never stop the worker
                self.listening.clear()
                if self._stop.is_set():
                    break
                if not dropped:  # one line per outage, not one per reconnect attempt
                    log.warning(
                        "%s: LISTEN connection failed (%s); polling every poll_interval until "
                        "it is back, retrying every %gs",
                        self.component,
                        str(exc).strip().splitlines()[0]
                        if str(exc).strip()
                        else type(exc).__name__,
                        self.RECONNECT_DELAY,
                    )
                dropped = True
                self._stop.wait(self.RECONNECT_DELAY)
            finally:
                if listener is not None:
                    with contextlib.suppress(Exception):  # a broken connection may not close
                        listener.close()
        self.listening.clear()
