"""The worker's connections on its event loop (``capabilities.loop_connections``).

The claim and the outcome writes are the hot path: run in the database threads, each waits
for the GIL to send its statement and again to decode the answer while the loop runs jobs,
so a claim leaves only once the loop goes idle. Awaited on the loop, a statement is sent at
once and its round trip and commit overlap the jobs. Heartbeats, maintenance and everything
else stay on the pool, in threads.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from .._drivers import Driver, FinishRequest, LoopConnection
from .._engine import keyed
from ..errors import LeaseLost
from ..types import Finished

__all__ = ["LoopConnections"]

log = logging.getLogger("durq.worker")


class LoopConnections:
    """One connection per statement in flight (a claim, two outcome writes), each opened
    at first use and kept while it works; one that failed is closed, never used again."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._idle: list[LoopConnection] = []
        self._closed = False

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[LoopConnection]:
        conn = self._idle.pop() if self._idle else await self._driver.loop_connection()
        try:
            yield conn
        except BaseException:
            await _close(conn)  # it may be broken, or mid-statement (cancelled)
            raise
        if self._closed:
            await _close(conn)
        else:
            self._idle.append(conn)

    async def write_jobs(self, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost] | None:
        """A batch of plain outcomes written on the loop, as ``keyed.finish_batch`` writes
        it: successes whose breakers have nothing to undo are plain too (read unlocked
        first, as there). None when another rule applies (a concurrency key, an alert, a
        dead letter, a breaker to move) or a request carries artifacts: those take the
        threaded write, which runs the rules in one transaction."""
        if any(req.artifacts for req in reqs):
            return None
        keys: list[str] = []
        if any(keyed.needs_rules(req) for req in reqs):
            found = keyed.plain_breaker_keys(reqs)
            if found is None:
                return None
            keys = found
        async with self.connection() as conn:
            if keys and not keyed.breakers_healthy(await conn.breaker_read_many(keys)):
                return None
            return await conn.job_finish_many(reqs)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await _close(conn)


async def _close(conn: LoopConnection) -> None:
    try:
        await conn.close()
    except Exception:  # closing a broken connection: nothing more to release
        log.debug("closing an event-loop connection failed", exc_info=True)
