"""Leases and fencing: a worker that lost its lease can never overwrite a newer owner."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import durq
from durq import states
from durq._drivers.base import FinishRequest
from durq._engine import jobs as engine
from durq.errors import InvalidStage, LeaseLost

from ..waiting import wait_until


def _claim_one(app: durq.App, lease: float) -> durq.Job:
    with app.driver.transaction() as ex:
        (job,) = app.driver.job_claim(
            ex, queue="default", worker_id="old-owner", limit=1, lease_seconds=lease
        )
    return job


def _reclaim(app: durq.App, job_id: int) -> durq.Job:
    """Wait (with a deadline) until the lease expires and the reclaimer takes the job."""
    reclaimed: list[durq.Job] = []

    def expired_and_reclaimed() -> bool:
        reclaimed.extend(j for j in app.reclaim_expired() if j.id == job_id)
        return bool(reclaimed)

    wait_until(expired_and_reclaimed, timeout=10, what=f"job {job_id} to be reclaimed")
    return reclaimed[0]


def test_stale_owner_writes_all_report_lease_lost_and_change_nothing(app: durq.App) -> None:
    @app.task(stages=("fetching", "processing"), retry=durq.Fixed([0]), max_attempts=3)
    def transcode() -> None: ...

    transcode.enqueue()
    old = _claim_one(app, lease=0.2)
    reclaimed = _reclaim(app, old.id)
    assert reclaimed.state == "retry_wait"
    assert reclaimed.claim_version == old.claim_version + 1  # reclaim allocates a new version
    assert reclaimed.last_error_code == "lease_expired"
    (lost,) = app.attempts(old.id)
    assert (lost.outcome, lost.attempt, lost.worker_id) == ("lost", 1, "old-owner")

    # The new owner claims it again: a new claim_version again.
    with app.driver.transaction() as ex:
        (new,) = app.driver.job_claim(
            ex, queue="default", worker_id="new-owner", limit=1, lease_seconds=30
        )
    assert new.claim_version == old.claim_version + 2 and new.attempt == 2
    snapshot = app.get_job(old.id)

    stale_writes: list[Callable[[], object]] = [
        lambda: _finish(app, old, states.complete({"stale": True})),
        lambda: _finish(app, old, states.retry(5, "E", "stale failure")),
        lambda: _finish(app, old, states.dead_letter("E", "stale failure")),
        lambda: _finish(app, old, states.snooze(5)),
        lambda: _heartbeat(app, old),
        lambda: _stage(app, old),
    ]
    for write in stale_writes:
        with pytest.raises(LeaseLost):
            write()
        assert app.get_job(old.id) == snapshot
    assert [a.outcome for a in app.attempts(old.id)] == ["lost"]

    # The real owner's write still goes through.
    done = _finish(app, new, states.complete("fresh"))
    assert (done.state, done.result, done.worker_id) == ("succeeded", "fresh", "new-owner")


def test_reclaim_dead_letters_when_attempts_are_used_up(app: durq.App) -> None:
    app.enqueue("t", {}, max_attempts=1)
    old = _claim_one(app, lease=0.2)
    reclaimed = _reclaim(app, old.id)
    assert (reclaimed.state, reclaimed.last_error_code) == ("dead_letter", "lease_expired")
    assert reclaimed.finished_at is not None


def test_reclaim_uses_the_jobs_retry_schedule(app: durq.App) -> None:
    @app.task(retry=durq.Fixed([60, 300]), max_attempts=5)
    def scheduled() -> None: ...

    scheduled.enqueue()
    old = _claim_one(app, lease=0.2)
    reclaimed = _reclaim(app, old.id)
    (lost,) = app.attempts(old.id)
    assert abs((reclaimed.run_at - lost.finished_at).total_seconds() - 60) < 0.001


def test_live_lease_is_not_reclaimed(app: durq.App) -> None:
    app.enqueue("t", {})
    job = _claim_one(app, lease=60)
    assert app.reclaim_expired() == []
    assert app.get_job(job.id).state == "running"


def test_heartbeat_keeps_a_short_lease_alive(app: durq.App) -> None:
    app.enqueue("t", {})
    job = _claim_one(app, lease=0.5)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # three lease lengths, renewed all along
        _heartbeat(app, job, lease=0.5)
        assert app.reclaim_expired() == []
        time.sleep(0.05)
    assert app.get_job(job.id).state == "running"


def _finish(app: durq.App, job: durq.Job, change: states.Change) -> durq.Job:
    req = FinishRequest(job.id, job.claim_version, job.worker_id, change, 1)
    with app.driver.transaction() as ex:
        return engine.finish(app.driver, ex, req)


def _heartbeat(app: durq.App, job: durq.Job, lease: float = 30) -> bool:
    with app.driver.transaction() as ex:
        return engine.heartbeat(app.driver, ex, job.id, job.claim_version, lease)


def _stage(app: durq.App, job: durq.Job) -> bool:
    try:
        with app.driver.transaction() as ex:
            return engine.set_stage(app.driver, ex, job, "fetching", None, 30)
    except InvalidStage as exc:  # pragma: no cover - would mean the fence did not hold
        raise AssertionError("a stale stage write must report lease lost") from exc
