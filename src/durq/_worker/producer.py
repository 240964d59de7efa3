"""The producer: claims ready jobs in batches sized to the worker's free capacity.

It claims as soon as there is room and work; when a claim comes back short (no more ready
jobs), it sleeps until the first of: a wake-up from the notifier (``notify`` on PostgreSQL,
``local`` in-process), the next scheduled job coming due (``due``), or the poll timer
(``poll``). Each claim is recorded with the reason the producer woke, so tests and
operators can see which path delivered a job. On PostgreSQL the claim is awaited on the
event loop (see loopconns); on SQLite, and with tracing on, it runs in a db thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import _tracing
from .._drivers import Driver, Executor
from .._drivers.jobs import claim_order
from .._engine.outage import Outage
from ..types import Job
from .inflight import InFlightJobs, Pulse
from .loopconns import LoopConnections

__all__ = ["ClaimRecord", "Producer"]

log = logging.getLogger("durq.worker")

T = TypeVar("T")
DbCall = Callable[..., Awaitable[Any]]

#: Never claim more than this many jobs in one statement.
MAX_BATCH = 100
#: Slack added to a due time so the job's ``run_at <= now`` holds when we claim.
DUE_SLACK = 0.005


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim: why the producer woke, and which jobs it got."""

    reason: str
    job_ids: tuple[int, ...]
    at: float


class Producer:
    def __init__(
        self,
        driver: Driver,
        *,
        queues: Sequence[str],
        worker_id: str,
        inflight: InFlightJobs,
        accept: Callable[[Sequence[Job], Mapping[int, str]], None],
        db: DbCall,
        poll_interval: float,
        lease_seconds: float,
        budget: int | None = None,
        once: bool = False,
        loop_conns: LoopConnections | None = None,
    ) -> None:
        self.driver = driver
        self.queues = list(dict.fromkeys(queues))
        self._turn = -1  # which queue is asked first; rotates so none starves the others
        self.worker_id = worker_id
        self.inflight = inflight
        #: Takes each claimed batch: starts what fits, buffers the rest (prefetch).
        self.accept = accept
        self.db = db
        self.poll_interval = poll_interval
        self.lease_seconds = lease_seconds
        #: Jobs this producer may still claim (``--max-jobs``); None: no limit.
        self.budget = budget
        self.once = once
        self.claimed = 0
        self.wakeups: Counter[str] = Counter()
        #: ``(reason, monotonic time)`` of recent claims, empty ones included.
        self.wake_log: deque[tuple[str, float]] = deque(maxlen=1000)
        self.claims: deque[ClaimRecord] = deque(maxlen=10_000)
        self.idle = asyncio.Event()  # set while waiting for work (not for capacity)
        self._wake = Pulse()
        self._wake_reason: str | None = None
        self._stopping = False
        #: ``{job_id: traceparent}`` of the last claim's traced jobs (tracing only).
        self.trace_contexts: dict[int, str] = {}
        self.outage = Outage("claims", driver, log)
        #: Claims awaited on this loop (PostgreSQL); None: claims run in the db threads.
        self.loop_conns = loop_conns
        #: Claims that went through an event-loop connection (tests, stats).
        self.loop_claims = 0

    # ---- wake-ups (event loop thread) ---------------------------------------------------

    def wake(self, reason: str) -> None:
        if self._wake_reason is None:
            self._wake_reason = reason
        self._wake.fire()

    def stop(self) -> None:
        self._stopping = True
        self.wake("stop")
        self.inflight.changed.fire()

    def reason_for(self, job_id: int) -> str | None:
        """Why the producer woke for the claim that took ``job_id`` (None: not claimed here)."""
        for record in reversed(self.claims):
            if job_id in record.job_ids:
                return record.reason
        return None

    # ---- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        reason = "start"
        while not self._stopping:
            want = self._room()
            if want == 0:
                if self.budget == 0:
                    return  # --max-jobs: everything allowed is claimed
                await self.inflight.changed.wait()
                reason = "capacity"
                continue
            self._wake_reason = None  # wake-ups from now on may mean new work
            try:
                jobs: list[Job] = await self._claim_now(want)
            except Exception as exc:  # the database is away: back off (<= 1 s), never crash
                await self._sleep(self.outage.failed(exc, "claim"))
                continue
            self.outage.ok()
            self._record(reason, jobs)
            traces, self.trace_contexts = self.trace_contexts, {}
            if jobs:
                self.accept(jobs, traces)
            if self.once:
                return
            if len(jobs) == want:
                reason = "backlog"  # a full batch: more may be ready, claim again
                continue
            reason = await self._idle_wait()

    def _room(self) -> int:
        room = min(self.inflight.free, MAX_BATCH)
        if self.budget is not None:
            room = min(room, self.budget)
        return room

    async def _claim_now(self, limit: int) -> list[Job]:
        # Traced claims read the jobs' trace contexts on a pooled connection: threaded.
        if self.loop_conns is not None and not _tracing.active():
            return await self._claim_on_loop(self.loop_conns, limit)
        return await self.db(self._claim, limit)  # type: ignore[no-any-return]

    async def _claim_on_loop(self, conns: LoopConnections, limit: int) -> list[Job]:
        """The claim on this event loop: sent at once, its round trip and commit overlapping
        the jobs the loop runs meanwhile (see loopconns)."""
        claimed: list[Job] = []
        async with conns.connection() as conn:
            for queue in self._next_order():
                claimed += await conn.job_claim(
                    queue=queue,
                    worker_id=self.worker_id,
                    limit=limit - len(claimed),
                    lease_seconds=self.lease_seconds,
                )
                if len(claimed) >= limit:
                    break
        self.loop_claims += 1
        if len(self.queues) > 1:
            claimed.sort(key=claim_order)
        return claimed

    def _next_order(self) -> list[str]:
        """The queues in the order this claim asks them; the first rotates per claim."""
        self._turn = (self._turn + 1) % len(self.queues)
        return self.queues[self._turn :] + self.queues[: self._turn]

    def _claim(self, limit: int) -> list[Job]:
        """Up to ``limit`` jobs, one claim statement per queue. Queues are independent (as
        in Oban and River): each is read in priority, run_at, id order, and the queue asked
        first rotates per call so a busy queue never starves the others."""
        if self.driver.capabilities.group_commit:
            # SQLite: the claim shares its commit (a disk wait) with the outcome write
            # that freed the room for it.
            return self.driver.write_together(lambda ex: self._claim_in(ex, limit))
        # Each claim statement stands alone, so on PostgreSQL it commits by itself: no BEGIN
        # and COMMIT round trips.
        with self.driver.autocommit() as ex:
            return self._claim_in(ex, limit)

    def _claim_in(self, ex: Executor, limit: int) -> list[Job]:
        order = self._next_order()
        claimed: list[Job] = []
        started = _tracing.now_ns()
        for queue in order:
            claimed += self.driver.job_claim(
                ex,
                queue=queue,
                worker_id=self.worker_id,
                limit=limit - len(claimed),
                lease_seconds=self.lease_seconds,
            )
            if len(claimed) >= limit:
                break
        self.trace_contexts = _tracing.claimed(self.driver, ex, claimed, started, self.worker_id)
        if len(order) > 1:
            claimed.sort(key=claim_order)
        return claimed

    def _next_due(self) -> float | None:
        with self.driver.read() as ex:
            return self.driver.job_next_due(ex, self.queues)

    def _record(self, reason: str, jobs: list[Job]) -> None:
        self.wakeups[reason] += 1
        self.wake_log.append((reason, time.monotonic()))
        if not jobs:
            return
        self.claimed += len(jobs)
        if self.budget is not None:
            self.budget -= len(jobs)
        self.claims.append(ClaimRecord(reason, tuple(j.id for j in jobs), time.monotonic()))
        log.debug("claimed %d job(s) (woken by %s)", len(jobs), reason)

    async def _idle_wait(self) -> str:
        """Sleep until a wake-up, the next due job, or the poll tick; return which it was."""
        timeout, on_timeout = self.poll_interval, "poll"
        try:
            due = await self.db(self._next_due)
        except Exception:  # only an optimisation: polling still covers it
            due = None
        if due is not None and due + DUE_SLACK < timeout:
            timeout, on_timeout = due + DUE_SLACK, "due"
        if self._wake_reason is not None:  # woken while we were claiming
            return self._wake_reason
        self.idle.set()
        try:
            woken = await self._wake.wait(timeout)
        finally:
            self.idle.clear()
        return (self._wake_reason or "poll") if woken else on_timeout

    async def _sleep(self, seconds: float) -> None:
        await self._wake.wait(seconds)
