"""Writing validated jobs: idempotency keys settled in SQL, safe inside a caller's
transaction (no savepoint: a concurrent winner is found after ``ON CONFLICT DO NOTHING``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._drivers import Driver, Executor, NewJob
from ..errors import IdempotencyConflict, JobGone
from ..types import Job
from . import keyed

__all__ = ["insert_job", "insert_job_ids", "insert_jobs"]


def insert_job(
    driver: Driver, ex: Executor, new: NewJob, *, notify: bool = True
) -> tuple[Job, bool]:
    """Insert one job; with an idempotency key, return the original instead.

    Returns ``(job, created)``. Raises ``IdempotencyConflict`` when the key was used with
    a different request. Runs inside ``ex``'s transaction and never ends it.
    ``notify=False`` (a job without keys): its wake-up is the caller's to send after commit.
    """
    if new.idempotency_key is None:
        if _keyed(new):
            new = keyed.enter(driver, ex, new)
        return driver.job_insert(ex, new, notify=notify), True
    scope, key = new.idempotency_scope or new.task, new.idempotency_key
    found = driver.idem_get(ex, scope, key)
    if found is not None and not found["expired"]:
        return _original(driver, ex, new, scope, found), False
    if found is not None:
        driver.idem_delete(ex, scope, key)
    if _keyed(new):  # a repeated key answers with its job even while the breaker is open
        new = keyed.enter(driver, ex, new)
    job = driver.job_insert(ex, new)
    won = driver.idem_insert(
        ex,
        scope=scope,
        key=key,
        args_hash=new.request_hash,
        job_id=job.id,
        ttl=new.idempotency_ttl,
    )
    if won:
        return job, True
    # A concurrent enqueue committed the same key first: undo our row, answer with theirs.
    driver.job_delete(ex, job.id)
    found = driver.idem_get(ex, scope, key)
    if found is None:  # pragma: no cover - the winner's key vanished between two statements
        raise IdempotencyConflict(scope, key, -1)
    return _original(driver, ex, new, scope, found), False


def insert_jobs(driver: Driver, ex: Executor, jobs: Sequence[NewJob]) -> list[Job]:
    """Insert many jobs in order: keyless ones in one driver call; keyed ones (and those
    with a webhook, whose insert writes their first event) one by one."""
    if _plain(jobs):
        return driver.job_insert_many(ex, jobs)
    return [insert_job(driver, ex, new)[0] for new in jobs]


def insert_job_ids(driver: Driver, ex: Executor, jobs: Sequence[NewJob]) -> list[int]:
    """``insert_jobs`` answering only the ids (an idempotent repeat answers the original's)."""
    if _plain(jobs):
        return driver.job_insert_many_ids(ex, jobs)
    return [insert_job(driver, ex, new)[0].id for new in jobs]


def _plain(jobs: Sequence[NewJob]) -> bool:
    return all(
        new.idempotency_key is None and new.webhook_url is None and not _keyed(new) for new in jobs
    )


def _keyed(new: NewJob) -> bool:
    return new.breaker_key is not None or new.concurrency_key is not None


def _original(
    driver: Driver, ex: Executor, new: NewJob, scope: str, found: Mapping[str, Any]
) -> Job:
    assert new.idempotency_key is not None
    job_id = int(found["job_id"])
    if found["args_hash"] != new.request_hash:
        raise IdempotencyConflict(scope, new.idempotency_key, job_id)
    job = driver.job_get(ex, job_id)
    if job is None:
        raise JobGone(job_id)
    return job
