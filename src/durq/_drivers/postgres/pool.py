"""durq's psycopg connection pool: connections checked on checkout, and recovery from a
restart or killed backends measured in a second rather than in tens of them.

The check costs a round trip, as much as a short statement: a connection that came back
to the pool moments ago in good order, with nothing waiting on its socket, is handed out
without it (its server answered it just now, and a server that closed it since has left
its goodbye or the end of the stream there). Once any connection comes back broken,
every checkout is checked again for a while, so a restart is found on checkout."""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import Connection, OperationalError
from psycopg.pq import ConnStatus
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

__all__ = ["POOL_NAME", "DurqPool"]

#: The name of durq's connection pools (psycopg's pool log lines carry it).
POOL_NAME = "durq"
#: A connection returned in good order less than this long ago skips the checkout check.
FRESH_SECONDS = 1.0
#: After a connection comes back broken, every checkout is checked for this long.
DISTRUST_SECONDS = 10.0


class _CappedAttempt(AttemptWithBackoff):
    """psycopg's reconnect backoff (1 s, doubling) capped near a second, so the pool has
    connections again about a second after the server is back."""

    INITIAL_DELAY = 0.1
    CAP = 1.0

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, self.CAP)


class DurqPool(ConnectionPool):
    """psycopg's pool; ``check=ConnectionPool.check_connection`` is what durq passes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: ``id(connection)`` -> when it came back in good order (monotonic seconds).
        self._returned: dict[int, float] = {}
        self._distrust_until = 0.0
        #: Checkout checks made and skipped (a connection fresh from use).
        self.checks = self.checks_skipped = 0

    def getconn(self, timeout: float | None = None) -> Connection[Any]:
        with _own_pool_lines():
            return super().getconn(timeout)

    def putconn(self, conn: Connection[Any]) -> None:
        now = time.monotonic()
        if conn.broken or conn.closed:
            self._distrust_until = now + DISTRUST_SECONDS
            self._returned.pop(id(conn), None)
        else:
            self._returned[id(conn)] = now
        with _own_pool_lines():
            super().putconn(conn)

    def _check_connection(self, conn: Connection[Any]) -> None:
        now = time.monotonic()
        returned = self._returned.pop(id(conn), None)
        if (
            returned is not None
            and now - returned < FRESH_SECONDS
            and now >= self._distrust_until
            and conn.pgconn.status == ConnStatus.OK
            and not _input_waiting(conn)
        ):
            self.checks_skipped += 1
            return
        self.checks += 1
        try:
            super()._check_connection(conn)
        except BaseException:
            self._distrust_until = time.monotonic() + DISTRUST_SECONDS
            raise

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(
            attempt or _CappedAttempt(timeout=self.reconnect_timeout), growing=growing
        )

    def _getconn_with_check_loop(self, deadline: float) -> Connection[Any]:
        # psycopg waits 1 s, 2 s, 4 s ... after each connection that fails its check; after
        # a restart every idle connection fails it, so a checkout could wait out the whole
        # timeout. One failed check sweeps every idle connection at once (dead ones are
        # replaced), and the waits between tries stay capped near a second.
        attempt: _CappedAttempt | None = None
        swept = False
        while True:
            conn = self._getconn_unchecked(deadline - time.monotonic())
            try:
                self._check_connection(conn)
            except BaseException as exc:
                self._putconn(conn, from_getconn=True)
                if not isinstance(exc, Exception):
                    raise  # cancelled, interrupted: give the connection back and stop
            else:
                return conn
            if not swept:
                swept = True
                self.check()
                continue
            now = time.monotonic()
            if attempt is None:
                attempt = _CappedAttempt(timeout=deadline - now)
            attempt.update_delay(now)
            if attempt.time_to_give_up(now):
                raise PoolTimeout()
            time.sleep(attempt.delay)


def _input_waiting(conn: Connection[Any]) -> bool:
    """Whether an idle connection's socket has something to read: an idle session is sent
    nothing unasked but a closing server's FATAL message, the end of the stream, or a rare
    notice. A non-blocking poll, no round trip, like pgx's CheckConn."""
    try:
        fd = conn.pgconn.socket
    except OperationalError:  # no socket: closed
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


_in_pool = threading.local()


@contextmanager
def _own_pool_lines() -> Iterator[None]:
    _in_pool.active = True
    try:
        yield
    finally:
        _in_pool.active = False


class _QuietPoolLines(logging.Filter):
    """psycopg's pool logs a WARNING per broken connection and per failed reconnect; durq's
    components log one line when the database goes away and one when it is back, so the
    pool's own lines about durq's pools (from its threads, named after the pool, or from a
    checkout of one) are demoted to DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and (
            getattr(_in_pool, "active", False)
            or (record.threadName or "").startswith(f"{POOL_NAME}-")
            or _names_durq_pool(record.args)
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def _names_durq_pool(args: Any) -> bool:
    for arg in args if isinstance(args, tuple) else ():
        if arg == POOL_NAME or getattr(getattr(arg, "_pool", None), "name", None) == POOL_NAME:
            return True
    return False


logging.getLogger("psycopg.pool").addFilter(_QuietPoolLines())
