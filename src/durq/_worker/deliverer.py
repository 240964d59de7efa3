"""The delivery service: outbox events delivered under the jobs' ownership protocol.

* claim: a batch (``webhook_batch_size``, default 10, at most 25) in one statement, each
  event under a fresh ``claim_version`` and lease; only the head of each job's undelivered
  events is ever claimable, so a job's events arrive in order;
* send: at most ``webhook_concurrency`` requests at once (default 5), each signed;
* heartbeat: held events' leases are extended while they are sent;
* write: outcomes go through a :class:`~durq._worker.completer.Completer` (the jobs' own
  batching and failure policy), fenced by ``claim_version``;
* reclaim: expired delivery leases (a killed process) are taken back with a new
  ``claim_version`` and retried like a failure;
* wake: a poll jittered between 500 and 1500 ms, plus NOTIFY on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from .._drivers import DeliveryWrite, Driver
from .._engine import delivery
from .._engine.delivery import DeliveryPolicy
from .._engine.http import httpx_module
from .._engine.outage import Outage
from .._engine.signing import Signer
from .._maintenance.reclaim import reclaim_deliveries
from ..errors import LeaseLost
from ..types import OutboxEvent

if TYPE_CHECKING:
    import httpx
from .completer import Completer
from .inflight import Pulse
from .notifier import Notifier

__all__ = ["OUTBOX_CHANNEL", "Deliverer"]

log = logging.getLogger("durq.deliver")

DbCall = Callable[..., Awaitable[Any]]
#: The notification payload the outbox trigger sends; never a queue name (those start
#: with a letter or digit), so job producers ignore it.
OUTBOX_CHANNEL = "__outbox__"


def _dead(write: DeliveryWrite, reason: str) -> DeliveryWrite:
    return replace(write, to_state="dead_letter", delay=None, error=f"unwritable: {reason}")


class Deliverer:
    def __init__(
        self,
        driver: Driver,
        *,
        worker_id: str,
        db: DbCall,
        signer: Signer,
        policy: DeliveryPolicy,
        batch_size: int = 10,
        concurrency: int = 5,
        timeout: float = 10.0,
        lease_seconds: float = 30.0,
        poll: tuple[float, float] = (0.5, 1.5),
        listen: bool = True,
    ) -> None:
        self.driver = driver
        self.worker_id = worker_id
        self.db = db
        self.signer = signer
        self.policy = policy
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.timeout = timeout
        self.lease_seconds = lease_seconds
        self.poll = poll
        self.outcomes: Counter[str] = Counter()  # delivered, retried, dead_letter, lost
        # Requests this process sent, and how the receivers answered (2xx or not; a
        # request abandoned when its lease was lost counts as attempted only).
        self.attempted = 0
        self.succeeded = 0
        self.failed = 0
        self.latencies: list[float] = []
        self.held: dict[int, OutboxEvent] = {}
        self._sending: dict[int, asyncio.Task[None]] = {}
        self._wake = Pulse()
        self._changed = Pulse()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None
        self._httpx = httpx_module()  # a clear error now, not at the first event
        self._next_reclaim = 0.0
        self.completer: Completer[OutboxEvent, DeliveryWrite] = Completer(
            driver,
            db=db,
            on_written=self._on_written,
            write_batch=driver.finish_deliveries,
            fallback=_dead,
            describe=lambda w: f"outbox event {w.id}: its delivery outcome ({w.to_state})",
            recheck=partial(delivery.reread_writes, driver),
            component="delivery outcome writes",
        )
        self.claims = Outage("outbox claims", driver, log)
        self.beats = Outage("delivery heartbeats", driver, log)
        self.notifier = Notifier(
            driver,
            [OUTBOX_CHANNEL],
            self._wake_threadsafe,
            listen=listen,
            component="outbox wake-ups",
        )

    # ---- service -----------------------------------------------------------------------

    def start(self) -> None:
        self._loop = loop = asyncio.get_running_loop()
        self._client = self._httpx.AsyncClient(timeout=self.timeout)
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self.completer.start()
        self.notifier.start()
        self._tasks = [
            loop.create_task(self._run(), name="durq-deliver"),
            loop.create_task(self._heartbeat(), name="durq-deliver-heartbeat"),
        ]

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop claiming, let the requests in flight finish (for ``timeout`` seconds), write
        their outcomes. Events still held then keep their lease until it expires."""
        self._stopping = True
        self._wake.fire()
        self._changed.fire()
        if self._sending:
            await asyncio.wait(list(self._sending.values()), timeout=timeout)
        await self.completer.stop(timeout)
        for task in [*self._tasks, *self._sending.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._sending.values(), return_exceptions=True)
        self.notifier.stop()
        if self._client is not None:
            await self._client.aclose()

    def stats(self) -> dict[str, Any]:
        """This process's deliveries: requests attempted, answered 2xx (succeeded) or not
        (failed), and the outcomes written for them."""
        return {
            "attempted": self.attempted,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "outcomes": dict(self.outcomes),
        }

    def summary(self) -> str:
        return (
            f"deliveries: {self.attempted} attempted, {self.succeeded} succeeded, "
            f"{self.failed} failed"
        )

    def _wake_threadsafe(self, reason: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._wake.fire)

    # ---- claim -------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            await self._maybe_reclaim()
            room = self.batch_size - len(self.held)
            if room <= 0:
                await self._changed.wait(self.poll[1])
                continue
            try:
                events: list[OutboxEvent] = await self.db(self._claim, room)
            except Exception as exc:  # the database is away: back off (<= 1 s)
                await self._wake.wait(self.claims.failed(exc, "claim"))
                continue
            self.claims.ok()
            for event in events:
                self.held[event.id] = event
                self._sending[event.id] = asyncio.get_running_loop().create_task(
                    self._deliver(event)
                )
            if len(events) < room and not self._stopping:
                # Poll jitter, not a secret: the standard generator is right here.
                await self._wake.wait(random.uniform(*self.poll))  # nosec B311

    def _claim(self, limit: int) -> list[OutboxEvent]:
        with self.driver.transaction() as ex:
            return self.driver.outbox_claim(
                ex, worker_id=self.worker_id, limit=limit, lease_seconds=self.lease_seconds
            )

    async def _maybe_reclaim(self) -> None:
        now = time.monotonic()
        if now < self._next_reclaim:
            return
        self._next_reclaim = now + min(5.0, max(0.2, self.lease_seconds / 4))
        try:
            taken = await self.db(reclaim_deliveries, self.driver, self.policy)
        except Exception as exc:  # tried again at the next round
            self.claims.failed(exc, "reclaim")
            return
        if taken:
            log.warning("reclaimed %d outbox event(s) whose delivery lease expired", len(taken))

    # ---- send --------------------------------------------------------------------------

    async def _deliver(self, event: OutboxEvent) -> None:
        assert self._client is not None
        async with self._semaphore:
            started = time.monotonic()
            body = delivery.body(event)
            headers = self.signer.headers(event.owner, body, event.event_id)
            status: int | None = None
            error: str | None = None
            self.attempted += 1  # counted when sent: a request cut off by a lost lease too
            try:
                answer = await self._client.post(event.url, content=body, headers=headers)
                status = answer.status_code
                if not 200 <= status < 300:
                    error = f"HTTP {status}: {answer.text[:200]}"
            except self._httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
            self.latencies.append(time.monotonic() - started)
            if error is None:
                self.succeeded += 1
            else:
                self.failed += 1
        if event.id not in self.held:
            return  # the lease was lost while we sent: touch nothing
        self.completer.submit(event, delivery.outcome_write(event, status, error, self.policy))

    def _on_written(self, event: OutboxEvent, write: DeliveryWrite, result: Any) -> None:
        self.held.pop(event.id, None)
        self._sending.pop(event.id, None)
        if isinstance(result, OutboxEvent):
            outcome = "retried" if result.state == "pending" else result.state
        else:
            outcome = "lost" if isinstance(result, LeaseLost) else "unwritten"
        self.outcomes[outcome] += 1
        if outcome != "delivered":
            log.info("outbox event %s: %s (%s)", event.event_id, outcome, write.error)
        self._changed.fire()
        if outcome in ("delivered", "dead_letter"):
            self._wake.fire()  # the job's next event is at the head now

    # ---- heartbeat ---------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        every = delay = max(0.05, self.lease_seconds / 3)
        while True:
            await asyncio.sleep(delay)
            delay = every
            held = [(e.id, e.claim_version) for e in self.held.values()]
            if not held:
                continue
            try:
                alive: set[int] = await self.db(self._beat, held)
            except Exception as exc:  # tried again soon: the leases are safe till they end
                delay = min(every, self.beats.failed(exc, "heartbeat"))
                continue
            self.beats.ok()
            for event_id, _ in held:
                if event_id not in alive and event_id in self.held:
                    event = self.held.pop(event_id)
                    log.info(
                        "outbox event %s: lost (its lease was taken over; abandoning it)",
                        event.event_id,
                    )
                    task = self._sending.pop(event_id, None)
                    if task is not None:
                        task.cancel()
                    self.outcomes["lost"] += 1

    def _beat(self, held: list[tuple[int, int]]) -> set[int]:
        with self.driver.transaction() as ex:
            return self.driver.outbox_heartbeat_many(ex, held, self.lease_seconds)
