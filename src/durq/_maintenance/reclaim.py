"""Expired leases → ``retry_wait`` or ``dead_letter``, by the same rules as a failure.

A worker that died (SIGKILL, lost host, lost network) stops heartbeating; once its lease
runs out, its jobs are taken back with a new ``claim_version`` and the lost attempt is
recorded with outcome ``lost`` (seed 002 US-INFRA-10). Safe with any number of reclaimers:
PostgreSQL locks the rows it reclaims with ``SKIP LOCKED``; SQLite writes one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..types import Job

if TYPE_CHECKING:
    from ..app import App

__all__ = ["run_once"]

BATCH = 100


def run_once(app: App, *, max_batches: int = 20) -> list[Job]:
    """Reclaim every expired lease (in batches); returns the jobs as they are now."""
    with app.driver.read() as ex:  # usually nothing expired: look before taking a write lock
        if not app.driver.job_expired(ex, 1):
            return []
    reclaimed: list[Job] = []
    for _ in range(max_batches):
        batch = app.reclaim_expired(BATCH)
        reclaimed.extend(batch)
        if len(batch) < BATCH:
            break
    return reclaimed
