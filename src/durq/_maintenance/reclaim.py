"""Expired leases → ``retry_wait`` or ``dead_letter``, by the same rule as a failure.

A worker that died (SIGKILL, lost host, lost network) stops heartbeating; once its lease
runs out, its jobs are taken back with a new ``claim_version`` and the lost attempt is
recorded with outcome ``lost``. Each job is decided and written on its own: a job whose
rule fails is dead-lettered as ``outcome_unwritable``, and a job whose write fails is
logged and left for the next round, so one bad job never keeps the others from being
reclaimed. Safe with any number of reclaimers: the write is fenced by ``claim_version``.
"""

from __future__ import annotations

import logging

from .. import states
from .._drivers import Driver, FinishRequest
from .._engine import jobs
from .._engine.delivery import DeliveryPolicy, reclaim_write
from .._engine.policy import next_change
from ..errors import LeaseLost
from ..types import Job, OutboxEvent

__all__ = ["reclaim_batch", "reclaim_deliveries", "run_once"]

log = logging.getLogger("durq.maintenance")

BATCH = 100


def reclaim_batch(driver: Driver, limit: int = BATCH) -> list[Job]:
    """Reclaim up to ``limit`` expired leases, each in its own transaction."""
    with driver.read() as ex:
        expired = driver.job_expired(ex, limit)
    reclaimed: list[Job] = []
    for job in expired:
        change = next_change(job, states.Lost())
        req = FinishRequest.for_job(job, job.worker_id, change, None)
        try:
            with driver.transaction() as ex:
                reclaimed.append(jobs.finish(driver, ex, req))
        except LeaseLost:  # its owner finished it, or another reclaimer took it
            continue
        except Exception as exc:
            log.error(
                "job %s (%s): reclaiming its expired lease failed (%s: %s); the other "
                "expired jobs go on, and this one is tried again next round",
                job.id,
                job.task,
                type(exc).__name__,
                exc,
            )
    return reclaimed


def run_once(driver: Driver, *, max_batches: int = 20) -> list[Job]:
    """Reclaim every expired lease (in batches); returns the jobs as they are now."""
    reclaimed: list[Job] = []
    for _ in range(max_batches):
        batch = reclaim_batch(driver, BATCH)
        reclaimed.extend(batch)
        if len(batch) < BATCH:
            break
    return reclaimed


def reclaim_deliveries(
    driver: Driver, policy: DeliveryPolicy, limit: int = BATCH
) -> list[OutboxEvent]:
    """Outbox events whose delivery lease expired, taken back with a new claim_version and
    retried (or dead-lettered) like a failed attempt; same per-item policy as jobs."""
    with driver.read() as ex:
        expired = driver.outbox_expired(ex, limit)
    taken: list[OutboxEvent] = []
    for event in expired:
        try:
            written = driver.finish_deliveries([reclaim_write(event, policy)])[0]
        except Exception as exc:
            log.error("outbox event %s: reclaiming its lease failed (%s)", event.event_id, exc)
            continue
        if isinstance(written, OutboxEvent):
            taken.append(written)
    return taken
