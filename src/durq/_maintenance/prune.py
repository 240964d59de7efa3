"""Delete finished jobs past their retention; keep their ids as tombstones.

Retention per terminal state comes from settings (``DURQ_PRUNE_SUCCEEDED_SECONDS``, default
1 day; ``…_DEAD_LETTER_SECONDS`` and ``…_CANCELLED_SECONDS``, 7 days). A pruned job's
attempts and artifacts go with it; its id stays in ``durq_tombstones`` for
``DURQ_PRUNE_TOMBSTONE_SECONDS`` (90 days), so ``get_job`` raises ``JobGone`` (HTTP 410)
for it while an id that never existed raises ``JobNotFound`` (404).
"""

from __future__ import annotations

import time

from .._drivers import Driver
from ..settings import Settings
from ..types import JobState

__all__ = ["WORKER_RETENTION_SECONDS", "run_once"]

BATCH = 500
#: Registry rows of workers not heard from for this long are forgotten.
WORKER_RETENTION_SECONDS = 7 * 24 * 3600.0


def retention(s: Settings) -> dict[JobState, float]:
    return {
        JobState.SUCCEEDED: s.prune_succeeded_seconds,
        JobState.DEAD_LETTER: s.prune_dead_letter_seconds,
        JobState.CANCELLED: s.prune_cancelled_seconds,
    }


def run_once(driver: Driver, settings: Settings, *, time_budget: float = 5.0) -> dict[str, int]:
    """One pruning round, in short transactions; returns how many jobs went per state.

    Stops after ``time_budget`` seconds even if more is due (the next round continues), so
    a large backlog never holds locks or the leader role for long.
    """
    backend = driver
    deadline = time.monotonic() + time_budget
    pruned: dict[str, int] = {}
    for state, older_than in retention(settings).items():
        total = 0
        while time.monotonic() < deadline:
            with backend.transaction() as ex:
                n = backend.job_prune(ex, state, older_than, BATCH)
            total += n
            if n < BATCH:
                break
        pruned[str(state)] = total
    with backend.transaction() as ex:
        backend.tombstone_prune(ex, settings.prune_tombstone_seconds, BATCH * 4)
        backend.idempotency_prune(ex, BATCH * 4)
        backend.worker_prune(ex, WORKER_RETENTION_SECONDS)
    return pruned
