"""The completer: fenced outcome writes and lease heartbeats, both batched.

Outcomes queue up while a write is in flight and go out together in one transaction
(one commit, one fsync on SQLite). Every write names the job's ``claim_version``; a write
that matches no row means the lease was lost, and the job is abandoned untouched.

Every ``heartbeat_seconds`` one statement extends the lease of every job the process holds
(running, or finished with the outcome still queued) and refreshes the worker's own row.
A job missing from the answer lost its lease; one flagged ``cancel_requested`` was
cancelled by an operator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._drivers.base import FinishRequest
from ..errors import LeaseLost
from ..types import Finished
from .inflight import InFlight, InFlightJobs

if TYPE_CHECKING:
    from ..app import App

__all__ = ["Completer"]

log = logging.getLogger("durq._worker")

DbCall = Callable[..., Awaitable[Any]]
#: What a write produced for one job: what it left, LeaseLost, or None (gave up).
Written = Finished | LeaseLost | None
OnWritten = Callable[[InFlight, FinishRequest, Written], None]

#: At most this many outcomes per transaction.
MAX_BATCH = 200
#: Writes in flight at once. Two keep the database busy while the worker handles the
#: answer to the last one (a finish waits on its commit's flush); each write is fenced
#: per job, so their order does not matter.
WRITERS = 2


class Completer:
    def __init__(
        self,
        app: App,
        *,
        worker_id: str,
        inflight: InFlightJobs,
        db: DbCall,
        lease_seconds: float,
        heartbeat_seconds: float,
        on_written: OnWritten,
    ) -> None:
        self.app = app
        self.worker_id = worker_id
        self.inflight = inflight
        self.db = db
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.on_written = on_written
        self.written = 0  # outcomes written (the worker row's ``processed``)
        self.batches = 0
        self._queue: asyncio.Queue[tuple[InFlight, FinishRequest]] = asyncio.Queue()
        self._giving_up = False

    # ---- outcomes ----------------------------------------------------------------------

    def submit(self, entry: InFlight, req: FinishRequest) -> None:
        self._queue.put_nowait((entry, req))

    async def run(self) -> None:
        writers = asyncio.Semaphore(WRITERS)
        writing: set[asyncio.Task[None]] = set()
        try:
            while True:
                await writers.acquire()
                batch = [await self._queue.get()]
                while len(batch) < MAX_BATCH and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                task = asyncio.get_running_loop().create_task(self._write_batch(batch, writers))
                writing.add(task)
                task.add_done_callback(writing.discard)
        finally:
            for task in writing:
                task.cancel()

    async def _write_batch(
        self, batch: list[tuple[InFlight, FinishRequest]], writers: asyncio.Semaphore
    ) -> None:
        try:
            await self._write(batch)
        finally:
            writers.release()
            for _ in batch:
                self._queue.task_done()

    async def flush(self, timeout: float) -> bool:
        """Wait until every submitted outcome is written; False if ``timeout`` passed."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            self._giving_up = True
            pending = self._queue.qsize()
            log.error(
                "could not write %d outcome(s) within %.0fs; their leases will expire and "
                "the jobs will be retried by another worker",
                pending,
                timeout,
            )
            return False
        return True

    async def _write(self, batch: list[tuple[InFlight, FinishRequest]]) -> None:
        reqs = [req for _, req in batch]
        results: Sequence[Written]
        failures = 0
        while True:
            try:
                results = await self.db(self.app.driver.finish_batch, reqs)
                break
            except Exception as exc:  # the database is away: keep the outcomes, retry
                if self._giving_up:
                    results = [None] * len(reqs)
                    break
                failures += 1
                delay = min(0.25 * 2**failures, 10.0)
                log.warning(
                    "writing %d outcome(s) failed (%s); retrying in %.1fs (writes are fenced, "
                    "so a retry can never overwrite a newer owner)",
                    len(reqs),
                    _brief(exc),
                    delay,
                )
                await asyncio.sleep(delay)
        self.batches += 1
        for (entry, req), result in zip(batch, results, strict=True):
            if isinstance(result, Finished):
                self.written += 1
            self.on_written(entry, req, result)

    # ---- heartbeats --------------------------------------------------------------------

    async def heartbeats(
        self, on_lost: Callable[[InFlight], None], on_cancel: Callable[[InFlight], None]
    ) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            await self.beat(on_lost, on_cancel)

    async def beat(
        self, on_lost: Callable[[InFlight], None], on_cancel: Callable[[InFlight], None]
    ) -> None:
        entries = self.inflight.entries()
        held = [(e.job.id, e.job.claim_version) for e in entries]
        try:
            alive: dict[int, bool] = await self.db(self._beat, held)
        except Exception as exc:
            log.warning(
                "heartbeat failed (%s); retrying in %.1fs. Leases last %.0fs, so jobs are "
                "safe if the database is back before then",
                _brief(exc),
                self.heartbeat_seconds,
                self.lease_seconds,
            )
            return
        for entry in entries:
            if entry not in self.inflight:
                continue  # finished while we were writing
            if entry.job.id not in alive:
                on_lost(entry)
            elif alive[entry.job.id]:
                on_cancel(entry)

    def _beat(self, held: list[tuple[int, int]]) -> dict[int, bool]:
        backend = self.app.driver
        with backend.transaction() as ex:
            alive = backend.job_heartbeat_many(ex, held, self.lease_seconds)
            backend.worker_heartbeat(ex, self.worker_id, self.written)
        return alive


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
