"""The heartbeater: every ``heartbeat_seconds`` one statement extends the lease of every
job the process holds (running, or finished with its outcome still queued) and refreshes
the worker's own row. A job missing from the answer lost its lease; one flagged
``cancel_requested`` was cancelled by an operator."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .._drivers import Driver
from .._engine.outage import Outage
from .inflight import InFlight, InFlightJobs

__all__ = ["Heartbeater"]

log = logging.getLogger("durq.worker")

DbCall = Callable[..., Awaitable[Any]]


class Heartbeater:
    def __init__(
        self,
        driver: Driver,
        *,
        worker_id: str,
        inflight: InFlightJobs,
        db: DbCall,
        lease_seconds: float,
        heartbeat_seconds: float,
        processed: Callable[[], int],
        on_lost: Callable[[InFlight], None],
        on_cancel: Callable[[InFlight], None],
    ) -> None:
        self.driver = driver
        self.worker_id = worker_id
        self.inflight = inflight
        self.db = db
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.processed = processed
        self.on_lost = on_lost
        self.on_cancel = on_cancel
        self._task: asyncio.Task[None] | None = None
        self.outage = Outage("heartbeats", driver, log)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="durq-heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        delay = self.heartbeat_seconds
        while True:
            await asyncio.sleep(delay)
            retry_in = await self.beat()
            # A failed beat is tried again soon (<= 1 s): leases are safe if it lands
            # before they run out.
            delay = min(retry_in or self.heartbeat_seconds, self.heartbeat_seconds)

    async def beat(self) -> float | None:
        """One heartbeat; None when it was written, else the seconds until the next try."""
        entries = self.inflight.entries()
        held = [(e.job.id, e.job.claim_version) for e in entries]
        try:
            alive: dict[int, bool] = await self.db(self._beat, held, self.processed())
        except Exception as exc:
            return self.outage.failed(exc, "heartbeat")
        self.outage.ok()
        for entry in entries:
            if entry not in self.inflight:
                continue  # finished while we were writing
            if entry.job.id not in alive:
                self.on_lost(entry)
            elif alive[entry.job.id]:
                self.on_cancel(entry)
        return None

    def _beat(self, held: list[tuple[int, int]], processed: int) -> dict[int, bool]:
        with self.driver.transaction() as ex:
            alive = self.driver.job_heartbeat_many(ex, held, self.lease_seconds)
            self.driver.worker_heartbeat(ex, self.worker_id, processed)
        return alive
