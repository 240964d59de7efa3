"""The completer: fenced outcome writes, batched, with a failure policy.

One completer writes job outcomes (``driver.finish_batch``); the delivery service builds
another over delivery outcomes (``driver.finish_deliveries``): the same batching and the
same failure policy for everything a lease holder writes.

Outcomes queue up while a write is in flight and go out together in one transaction
(one commit, one fsync on SQLite). Every write names the job's ``claim_version``; a write
that matches no row means the lease was lost, and the job is abandoned untouched.

Failure policy (one bad outcome never stalls the others):

* a *transient* database error (connection lost, server restarting, SQLite busy) retries
  the batch with a short capped backoff: the outcomes are kept, and fencing makes a retry
  harmless;
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
from .._engine import keyed
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
#: Backoff between retries of a transient failure: short, so writes resume within about
#: a second of the database coming back.
RETRY_FIRST, RETRY_MAX = 0.05, 1.0


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
    ) -> None:
        self.driver = driver
        self.db = db
        self.on_written = on_written
        self.write_batch: Callable[[Sequence[R]], Sequence[Any]] = (
            write_batch or partial(_write_jobs, driver)
        )
        self.fallback: Callable[[R, str], R] = fallback or _job_fallback  # type: ignore[assignment]
        self.describe: Callable[[R], str] = describe or _describe_job  # type: ignore[assignment]
        self.written = 0  # outcomes written (the worker row's ``processed``)
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
            results = await self._write([req for _, req in batch])
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

    async def _write(self, reqs: Sequence[R]) -> list[Any]:
        """Write ``reqs``; never raises. Transient errors retry, others split the batch."""
        delay = RETRY_FIRST
        while True:
            try:
                return list(await self.db(self.write_batch, reqs))
            except Exception as exc:
                if self._giving_up:
                    return [None] * len(reqs)
                if not self.driver.is_transient(exc):
                    return await self._isolate(reqs, exc)
                log.warning(
                    "writing %d outcome(s) failed (%s); retrying in %.2fs (writes are fenced, "
                    "so a retry can never overwrite a newer owner)",
                    len(reqs),
                    _brief(exc),
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    async def _isolate(self, reqs: Sequence[R], exc: Exception) -> list[Any]:
        if len(reqs) > 1:
            middle = len(reqs) // 2
            return await self._write(reqs[:middle]) + await self._write(reqs[middle:])
        req = reqs[0]
        self.unwritable += 1
        log.error(
            "%s cannot be stored (%s); dead-lettering it so the other outcomes are written",
            self.describe(req),
            _brief(exc),
        )
        fallback = self.fallback(req, _brief(exc))
        try:
            return list(await self.db(self.write_batch, [fallback]))
        except Exception as again:
            log.error(
                "%s: even its dead-letter could not be written (%s); its lease will "
                "expire and the reclaimer will take it",
                self.describe(req),
                _brief(again),
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


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
