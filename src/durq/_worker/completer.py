"""The completer: fenced outcome writes, batched, with a failure policy.

One completer writes job outcomes (``driver.finish_batch``; on PostgreSQL a batch of plain
outcomes is awaited on the event loop instead, see loopconns); the delivery service builds
another over delivery outcomes (``driver.finish_deliveries``): the same batching and the
same failure policy for everything a lease holder writes.

Outcomes queue up while a write is in flight and go out together in one transaction
(one commit, one fsync on SQLite). Every write names the job's ``claim_version``; a write
that matches no row means the lease was lost, and the job is abandoned untouched.

Failure policy (one bad outcome never stalls the others):

* a *transient* database error (connection lost, server restarting, SQLite busy) retries
  the batch with a short capped backoff: the outcomes are kept, and fencing makes a retry
  harmless. The first try may have committed with its answer lost on the way: a retry
  that then matches nothing is re-read (``recheck``) before anything is reported as a
  lost lease;
* any other error splits the batch in halves until the offending outcome stands alone;
  that job is then dead-lettered as ``outcome_unwritable`` with the database's reason,
  and every other outcome is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Generic, TypeVar

from .._drivers import Driver, FinishRequest
from .._engine import jobs, keyed
from .._engine.outage import Outage, brief
from .._engine.policy import unwritable
from ..errors import LeaseLost
from ..types import Finished
from .inflight import InFlight

__all__ = ["Completer", "Written"]

log = logging.getLogger("durq.worker")

DbCall = Callable[..., Awaitable[Any]]
#: What a write produced for one job: what it left, LeaseLost, or None (gave up).
Written = Finished | LeaseLost | None
OnWritten = Callable[[InFlight, FinishRequest, Written], None]

E = TypeVar("E")  # what the holder tracks per lease (an in-flight job, a held event)
R = TypeVar("R")  # one fenced write request

#: At most this many outcomes per transaction.
MAX_BATCH = 200
#: Writes in flight at once. Two keep the database busy while the worker handles the
#: answer to the last one (a finish waits on its commit's flush); each write is fenced
#: per job, so their order does not matter.
WRITERS = 2


def _job_fallback(req: FinishRequest, reason: str) -> FinishRequest:
    """A job outcome that cannot be stored becomes its ``outcome_unwritable`` dead letter."""
    lost = req.change.bump_version
    return replace(req, change=unwritable(reason, lost=lost), artifacts=())


class Completer(Generic[E, R]):
    """Batched fenced writes of requests ``R`` for holders tracking ``E`` per lease.

    ``write_batch`` writes a batch in one transaction and answers per request (what was
    written, or ``LeaseLost``); ``fallback`` turns a request that cannot be stored into
    the dead letter that says why. The defaults are the jobs' own."""

    def __init__(
        self,
        driver: Driver,
        *,
        db: DbCall,
        on_written: Callable[[E, R, Any], None],
        write_batch: Callable[[Sequence[R]], Sequence[Any]] | None = None,
        fallback: Callable[[R, str], R] | None = None,
        describe: Callable[[R], str] | None = None,
        recheck: Callable[[Sequence[tuple[E, R]]], Sequence[Any]] | None = None,
        write_on_loop: Callable[[Sequence[R]], Awaitable[Sequence[Any] | None]] | None = None,
        component: str = "outcome writes",
    ) -> None:
        self.driver = driver
        self.db = db
        self.on_written = on_written
        self.write_batch: Callable[[Sequence[R]], Sequence[Any]] = write_batch or partial(
            _write_jobs, driver
        )
        self.fallback: Callable[[R, str], R] = fallback or _job_fallback  # type: ignore[assignment]
        self.describe: Callable[[R], str] = describe or _describe_job  # type: ignore[assignment]
        #: What the writes of ``(entry, request)`` pairs in fact left, read back.
        self.recheck: Callable[[Sequence[tuple[E, R]]], Sequence[Any]] = recheck or partial(
            _reread_jobs, driver
        )
        #: Writes a batch on the event loop, or answers None to leave it to ``write_batch``
        #: in a db thread (see loopconns).
        self.write_on_loop = write_on_loop
        self.loop_writes = 0  # batches written on the event loop
        self.outage = Outage(component, driver, log)
        #: Writes whose commit went unanswered and that were found written on re-reading.
        self.found_written = 0
        self.written = 0  # outcomes written (releases too; the runner counts ``processed``)
        self.batches = 0
        self.unwritable = 0  # outcomes dead-lettered because they could not be stored
        self._queue: asyncio.Queue[tuple[E, R]] = asyncio.Queue()
        self._pending = 0  # submitted and not yet answered, in-flight batches included
        self._giving_up = False
        self._task: asyncio.Task[None] | None = None

    @property
    def gave_up(self) -> bool:
        """True once a flush ran out of time: some outcomes were not written."""
        return self._giving_up

    # ---- service -----------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="durq-completer")

    async def stop(self, timeout: float) -> bool:
        """Write everything submitted (for at most ``timeout`` seconds), then stop.
        False if some outcomes could not be written."""
        flushed = await self.flush(timeout)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        return flushed

    def submit(self, entry: E, req: R) -> None:
        self._pending += 1
        self._queue.put_nowait((entry, req))

    async def flush(self, timeout: float) -> bool:
        """Wait until every submitted outcome is written; False if ``timeout`` passed."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            self._giving_up = True
            log.error(
                "could not write %d outcome(s) within %.0fs; their leases will expire and "
                "the jobs will be retried by another worker",
                self._pending,
                timeout,
            )
            return False
        return True

    async def _run(self) -> None:
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

    async def _write_batch(self, batch: list[tuple[E, R]], writers: asyncio.Semaphore) -> None:
        try:
            results = await self._write(batch)
            self.batches += 1
            for (entry, req), result in zip(batch, results, strict=True):
                self._pending -= 1
                if result is not None and not isinstance(result, LeaseLost):
                    self.written += 1
                self.on_written(entry, req, result)
        finally:
            writers.release()
            for _ in batch:
                self._queue.task_done()

    # ---- the failure policy ------------------------------------------------------------

    async def _write(self, batch: Sequence[tuple[E, R]]) -> list[Any]:
        """Write ``batch``; never raises. Transient errors retry (writes are fenced, so a
        retry never overwrites a newer owner), others split the batch."""
        reqs = [req for _, req in batch]
        unanswered = False  # a try failed in flight: it may have committed
        while True:
            try:
                results = await self._write_once(reqs)
            except Exception as exc:
                if self._giving_up:
                    return [None] * len(reqs)
                if not self.driver.is_transient(exc):
                    return await self._isolate(batch, exc)
                unanswered = True
                await asyncio.sleep(self.outage.failed(exc, f"writing {len(reqs)} outcome(s)"))
                continue
            self.outage.ok()
            if unanswered:
                return await self._reread_lost(batch, results)
            return results

    async def _write_once(self, reqs: list[R]) -> list[Any]:
        if self.write_on_loop is not None:
            written = await self.write_on_loop(reqs)
            if written is not None:
                self.loop_writes += 1
                return list(written)
        return list(await self.db(self.write_batch, reqs))

    async def _reread_lost(self, batch: Sequence[tuple[E, R]], results: list[Any]) -> list[Any]:
        """Replace each ``LeaseLost`` of a retried write by what the first try left."""
        lost = [i for i, result in enumerate(results) if isinstance(result, LeaseLost)]
        while lost:
            try:
                found = await self.db(self.recheck, [batch[i] for i in lost])
            except Exception as exc:
                if self._giving_up:
                    break
                await asyncio.sleep(self.outage.failed(exc, "re-reading outcomes"))
                continue
            self.outage.ok()
            for i, result in zip(lost, found, strict=True):
                if not isinstance(result, LeaseLost):
                    self.found_written += 1
                results[i] = result
            break
        return results

    async def _isolate(self, batch: Sequence[tuple[E, R]], exc: Exception) -> list[Any]:
        if len(batch) > 1:
            middle = len(batch) // 2
            return await self._write(batch[:middle]) + await self._write(batch[middle:])
        _, req = batch[0]
        self.unwritable += 1
        log.error(
            "%s cannot be stored (%s); dead-lettering it so the other outcomes are written",
            self.describe(req),
            brief(exc),
        )
        fallback = self.fallback(req, brief(exc))
        try:
            return list(await self.db(self.write_batch, [fallback]))
        except Exception as again:
            log.error(
                "%s: even its dead-letter could not be written (%s); its lease will "
                "expire and the reclaimer will take it",
                self.describe(req),
                brief(again),
            )
            return [None]


def _write_jobs(driver: Driver, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
    """Jobs: breaker counts and limit slots are written with their outcomes. On SQLite the
    write shares its commit with a claim made beside it (``group_commit``)."""
    if driver.capabilities.group_commit:
        return driver.write_together(lambda ex: keyed.finish_batch(driver, reqs))
    return keyed.finish_batch(driver, reqs)


def _describe_job(req: FinishRequest) -> str:
    return f"job {req.job_id}: its outcome ({req.change.to_state})"


def _reread_jobs(driver: Driver, batch: Sequence[tuple[Any, FinishRequest]]) -> list[Any]:
    return list(jobs.reread_outcomes(driver, [req for _, req in batch]))
