"""The maintenance round every worker runs between claims.

Every worker reclaims expired leases (before its first claim and then every
``reclaim_interval``); only the holder of the ``maintenance`` leader lease enqueues
periodic ticks, prunes and checks the backlog guardrails (every ``guardrail_interval``).
:meth:`Maintenance.step` is synchronous and does one round; the worker calls it from a
database thread and sleeps for what it returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from .._drivers import Driver
from .._engine.schedule import PeriodicTask
from ..settings import Settings
from . import guardrails, periodic, prune, reclaim, rollup
from .leader import LeaderLease

__all__ = ["Maintenance"]

log = logging.getLogger("durq.maintenance")

LEADER_ROLE = "maintenance"


class Maintenance:
    #: Never sleep longer than this between rounds (keeps the leader lease fresh).
    MAX_SLEEP = 1.0

    def __init__(
        self,
        driver: Driver,
        settings: Settings,
        holder: str,
        *,
        schedules: Sequence[PeriodicTask] = (),
        enqueue_tick: periodic.EnqueueTick | None = None,
        reclaim_interval: float,
        prune_interval: float = 60.0,
        guardrail_interval: float = 30.0,
        rollup_interval: float = 15.0,
        leader_ttl: float = 10.0,
        on_reclaimed: Callable[[], None] | None = None,
    ) -> None:
        self.driver = driver
        self.settings = settings
        self.schedules = list(schedules)
        self.enqueue_tick = enqueue_tick
        #: Called (from the maintenance thread) after jobs were reclaimed: they are ready
        #: again, so the worker's producer should look now rather than at its next poll.
        self.on_reclaimed = on_reclaimed
        self.reclaim_interval = reclaim_interval
        self.prune_interval = prune_interval
        self.guardrail_interval = guardrail_interval
        self.rollup_interval = rollup_interval
        self.leader = LeaderLease(driver, LEADER_ROLE, holder, ttl=leader_ttl)
        self.reclaimed = 0
        self.periodic_enqueued = 0
        self.pruned = 0
        self._next_reclaim = 0.0
        self._next_prune = 0.0
        self._next_guardrails = 0.0
        self._next_rollup = 0.0
        self._rollup_from: float | None = None
        self._ticks_done: dict[str, datetime] = {}

    def step(self) -> float:
        """Do what is due now; return the seconds until something is due again."""
        now = time.monotonic()
        if now >= self._next_reclaim:
            self.reclaim()
            self._next_reclaim = now + self.reclaim_interval
        wait = min(self.MAX_SLEEP, self._next_reclaim - now)
        if self.leader.hold():
            jobs = (
                periodic.run_once(self.schedules, self.enqueue_tick, done=self._ticks_done)
                if self.enqueue_tick is not None
                else []
            )
            self.periodic_enqueued += len(jobs)
            for job in jobs:
                log.info("periodic %s enqueued as job %s", job.idempotency_key, job.id)
            if now >= self._next_prune:
                counts = prune.run_once(self.driver, self.settings)
                self._next_prune = now + self.prune_interval
                self.pruned += sum(counts.values())
                if any(counts.values()):
                    log.info("pruned finished jobs past retention: %s", counts)
            if now >= self._next_guardrails:
                self.check_guardrails()
                self._next_guardrails = now + self.guardrail_interval
            if now >= self._next_rollup:
                self._rollup_from = rollup.run_once(self.driver, self._rollup_from)
                self._next_rollup = now + self.rollup_interval
            tick = periodic.seconds_until_next_tick(self.schedules)
            if tick is not None:
                wait = min(wait, tick)
        else:
            self._ticks_done.clear()  # a new term starts from the database's view
            self._rollup_from = None
        return max(0.01, wait)

    def reclaim(self) -> None:
        jobs = reclaim.run_once(self.driver)
        self.reclaimed += len(jobs)
        if jobs and self.on_reclaimed is not None:
            self.on_reclaimed()
        for job in jobs:
            log.warning(
                "job %s (%s): the lease of worker %s expired; the attempt is recorded as "
                "lost and the job is now %s",
                job.id,
                job.task,
                job.worker_id,
                job.state,
            )

    def check_guardrails(self) -> guardrails.GuardrailRound:
        try:
            return guardrails.run_once(self.driver, self.settings)
        except Exception as exc:  # health checks must never stop the worker
            log.error("backlog guardrails round failed (%s: %s)", type(exc).__name__, exc)
            return guardrails.GuardrailRound()

    def close(self) -> None:
        self.leader.release()
