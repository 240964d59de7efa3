"""Operations on one job by id: read, cancel, requeue, and the fenced writes a holder
makes (heartbeat, stage, finish). Each turns the driver's plain answer into durq's rules:
a fenced write that matched nothing is ``LeaseLost``; an id that was pruned is ``JobGone``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import states
from .._drivers import Driver, Executor, FinishRequest
from ..errors import InvalidStage, JobGone, JobNotFound, LeaseLost
from ..types import Finished, Job, JobState
from . import keyed, wakeups

__all__ = [
    "Requeued",
    "cancel",
    "finish",
    "get",
    "heartbeat",
    "owner_queue_stats",
    "queue_stats",
    "requeue",
    "reread_outcomes",
    "set_stage",
]


def get(driver: Driver, ex: Executor, job_id: int) -> Job:
    """The job, or ``JobNotFound`` (``JobGone`` if it was pruned)."""
    job = driver.job_get(ex, job_id)
    if job is not None:
        return job
    if driver.tombstone_get(ex, job_id):
        raise JobGone(job_id, created_by=driver.tombstone_owner(ex, job_id))
    raise JobNotFound(job_id)


def cancel(driver: Driver, ex: Executor, job_id: int) -> Job:
    """queued/retry_wait → cancelled; running → cancel requested (honoured at the holder's
    next fenced write); finished → unchanged (a no-op that reports the state)."""
    job = driver.job_cancel_ready(ex, job_id, sorted(states.cancel()))
    if job is None:
        job = driver.job_cancel_running(ex, job_id)
    return job if job is not None else get(driver, ex, job_id)


@dataclass(frozen=True, slots=True)
class Requeued:
    job: Job
    idempotent: bool
    notified: bool  # a NOTIFY went out with the change (delivered when it commits)


def requeue(driver: Driver, ex: Executor, job_id: int) -> Requeued:
    """Any state but running → queued with attempts, error and finish time reset; a
    running job is left alone (``idempotent``). Idle workers in other processes are
    notified in the same transaction where the database can."""
    job = driver.job_requeue(ex, job_id, sorted(states.requeue()))
    if job is None:
        return Requeued(get(driver, ex, job_id), idempotent=True, notified=False)
    notified = driver.capabilities.listen_notify
    if notified:
        driver.notify_queue(ex, job.queue)
    return Requeued(job, idempotent=False, notified=notified)


def announce_committed(driver: Driver, queues: set[str] | list[str]) -> bool:
    """After commit: wake this process's producers, and other processes' where the
    database wakes them only after commit; True if a worker was woken."""
    woken = wakeups.announce(driver.url, queues)
    if driver.capabilities.wake_after_commit:
        woken = driver.wake_listeners(queues) > 0 or woken
    return woken


def heartbeat(
    driver: Driver, ex: Executor, job_id: int, claim_version: int, lease_seconds: float
) -> bool:
    """Extend a held lease: ``cancel_requested``; ``LeaseLost`` if it is not held."""
    cancel_requested = driver.job_heartbeat(ex, job_id, claim_version, lease_seconds)
    if cancel_requested is None:
        raise LeaseLost(job_id, claim_version)
    return cancel_requested


def set_stage(
    driver: Driver,
    ex: Executor,
    job: Job,
    stage: str,
    expected_stage: str | None,
    lease_seconds: float,
) -> bool:
    """Advance a held job's stage: ``cancel_requested``. ``InvalidStage`` if the job is
    held but at another stage; ``LeaseLost`` if it is not held."""
    cancel_requested = driver.job_set_stage(
        ex,
        job_id=job.id,
        claim_version=job.claim_version,
        stage=stage,
        expected_stage=expected_stage,
        lease_seconds=lease_seconds,
    )
    if cancel_requested is not None:
        return cancel_requested
    current = driver.job_get(ex, job.id)
    if current and current.state == "running" and current.claim_version == job.claim_version:
        raise InvalidStage(
            f"job {job.id} is at stage {current.stage!r}; it cannot move to {stage!r} "
            f"(expected to come from {expected_stage!r}). Stages advance in the order the "
            "task declares"
        )
    raise LeaseLost(job.id, job.claim_version)


def finish(driver: Driver, ex: Executor, req: FinishRequest) -> Job:
    """Write an outcome if the lease is still held, else raise ``LeaseLost``; the rules of
    the job's keys run in the same transaction."""
    return keyed.finish(driver, ex, req)


def reread_outcomes(driver: Driver, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
    """For outcome writes whose commit went unanswered (the connection dropped) and whose
    retry then matched nothing: did the first try land? An attempt record for the claim
    that is not the reclaimer's ``lost`` can only be this holder's own write."""
    out: list[Finished | LeaseLost] = []
    with driver.read() as ex:
        for req in reqs:
            outcome = driver.attempt_outcome(ex, req.job_id, req.claim_version)
            job = driver.job_get(ex, req.job_id) if outcome not in (None, "lost") else None
            if job is None:
                out.append(LeaseLost(req.job_id, req.claim_version))
                continue
            state = JobState.CANCELLED if outcome == "cancelled" else req.change.to_state
            out.append(Finished(job.id, state, job.run_at, job.last_error_code, job.last_error))
    return out


def queue_stats(
    driver: Driver, ex: Executor, *, degraded_p95_age: float, degraded_ready: int
) -> dict[str, dict[str, Any]]:
    """Per queue: counts by state, ready count, oldest and p95 age (seconds) of ready jobs,
    ``paused``, and ``degraded`` when the p95 age or the ready count passes its guardrail."""
    stats: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return stats.setdefault(
            name,
            {
                "counts": {str(s): 0 for s in JobState},
                "ready": 0,
                "oldest_age_seconds": None,
                "p95_age_seconds": None,
                "paused": False,
            },
        )

    for queue, state, n in driver.queue_counts(ex):
        entry(queue)["counts"][state] = n
    for queue, paused in driver.queue_list(ex):
        entry(queue)["paused"] = paused
    for queue, ready, oldest, p95 in driver.queue_ready_ages(ex):
        e = entry(queue)
        e["ready"] = ready
        e["oldest_age_seconds"] = max(0.0, oldest)
        e["p95_age_seconds"] = max(0.0, p95)
    for e in stats.values():
        e["degraded"] = bool(
            (e["p95_age_seconds"] or 0.0) > degraded_p95_age or e["ready"] > degraded_ready
        )
    return stats


def owner_queue_stats(
    driver: Driver, ex: Executor, owner: str, queue_wide: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``queue_wide`` narrowed to ``owner``'s jobs: only queues it has jobs in, its own
    counts and ready jobs; the ages, which describe every owner's jobs, are left out."""
    stats: dict[str, dict[str, Any]] = {}
    for queue, state, n, ready in driver.queue_owner_counts(ex, owner):
        e = stats.setdefault(
            queue,
            {
                "counts": {str(s): 0 for s in JobState},
                "ready": 0,
                "oldest_age_seconds": None,
                "p95_age_seconds": None,
                "paused": queue_wide.get(queue, {}).get("paused", False),
                "degraded": queue_wide.get(queue, {}).get("degraded", False),
            },
        )
        e["counts"][state] = n
        e["ready"] += ready
    return stats
