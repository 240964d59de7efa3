"""Operator actions on one job: cancel a waiting job, ask a running one to stop, requeue."""

from __future__ import annotations

from durq import states
from durq._drivers import Driver
from durq.types import Job, JobState

from .helpers import JobFactory, ago, claim, claim_one, finish, get, insert, near

CANCELLABLE = sorted(states.cancel())  # queued, retry_wait
REQUEUEABLE = sorted(states.requeue())  # every state but running


def _in_every_state(driver: Driver, new_job: JobFactory) -> dict[JobState, Job]:
    """One job in each state (running is claimed, the others finished from running)."""
    queued = insert(driver, new_job(queue="q"))
    for _ in range(5):
        insert(driver, new_job(max_attempts=3))
    running, retry_wait, succeeded, dead, cancelled = claim(driver, limit=5)
    finish(driver, retry_wait, states.retry(600, "E", "m"))
    finish(driver, succeeded, states.complete({"r": 1}))
    finish(driver, dead, states.dead_letter("Fatal", "no"))
    finish(driver, cancelled, states.cancel_running())
    jobs = {
        JobState.QUEUED: queued,
        JobState.RUNNING: running,
        JobState.RETRY_WAIT: retry_wait,
        JobState.SUCCEEDED: succeeded,
        JobState.DEAD_LETTER: dead,
        JobState.CANCELLED: cancelled,
    }
    current = {state: get(driver, job.id) for state, job in jobs.items()}
    assert {state: job.state for state, job in current.items()} == {s: s for s in jobs}
    return current


def test_job_cancel_ready_cancels_waiting_jobs(driver: Driver, new_job: JobFactory) -> None:
    jobs = _in_every_state(driver, new_job)
    for state in (JobState.QUEUED, JobState.RETRY_WAIT):
        with driver.transaction() as ex:
            done = driver.job_cancel_ready(ex, jobs[state].id, CANCELLABLE)
        assert done is not None and done == get(driver, jobs[state].id)
        assert (done.state, done.last_error_code, done.last_error) == (
            JobState.CANCELLED,
            "cancelled",
            "cancelled by request",
        )
        assert near(done.finished_at, ago(0))
        assert (done.attempt, done.claim_version) == (
            jobs[state].attempt,
            jobs[state].claim_version,
        )


def test_job_cancel_ready_leaves_jobs_in_other_states(driver: Driver, new_job: JobFactory) -> None:
    jobs = _in_every_state(driver, new_job)
    for state in (JobState.RUNNING, JobState.SUCCEEDED, JobState.DEAD_LETTER, JobState.CANCELLED):
        with driver.transaction() as ex:
            assert driver.job_cancel_ready(ex, jobs[state].id, CANCELLABLE) is None
        assert get(driver, jobs[state].id) == jobs[state]
    with driver.transaction() as ex:
        assert driver.job_cancel_ready(ex, 999_999, CANCELLABLE) is None


def test_job_cancel_ready_only_from_the_states_given(driver: Driver, new_job: JobFactory) -> None:
    jobs = _in_every_state(driver, new_job)
    with driver.transaction() as ex:
        assert driver.job_cancel_ready(ex, jobs[JobState.RETRY_WAIT].id, ["queued"]) is None
        assert driver.job_cancel_ready(ex, jobs[JobState.QUEUED].id, []) is None
        done = driver.job_cancel_ready(ex, jobs[JobState.QUEUED].id, ["queued"])
    assert done is not None and done.state == JobState.CANCELLED
    assert get(driver, jobs[JobState.RETRY_WAIT].id) == jobs[JobState.RETRY_WAIT]


def test_job_cancel_running_requests_a_cancel_and_keeps_the_lease(
    driver: Driver, new_job: JobFactory
) -> None:
    insert(driver, new_job())
    job = claim_one(driver)
    with driver.transaction() as ex:
        asked = driver.job_cancel_running(ex, job.id)
    assert asked is not None and asked == get(driver, job.id)
    assert (asked.state, asked.cancel_requested) == (JobState.RUNNING, True)
    assert (asked.claim_version, asked.worker_id, asked.lease_expires_at) == (
        job.claim_version,
        job.worker_id,
        job.lease_expires_at,
    )
    with driver.transaction() as ex:  # asking twice changes nothing more
        again = driver.job_cancel_running(ex, job.id)
    assert again is not None and again.cancel_requested is True


def test_job_cancel_running_of_a_job_not_running_returns_none(
    driver: Driver, new_job: JobFactory
) -> None:
    jobs = _in_every_state(driver, new_job)
    for state, job in jobs.items():
        if state == JobState.RUNNING:
            continue
        with driver.transaction() as ex:
            assert driver.job_cancel_running(ex, job.id) is None
        assert get(driver, job.id) == job
    with driver.transaction() as ex:
        assert driver.job_cancel_running(ex, 999_999) is None


def test_job_requeue_resets_a_finished_job_and_keeps_its_fence(
    driver: Driver, new_job: JobFactory
) -> None:
    jobs = _in_every_state(driver, new_job)
    for state in REQUEUEABLE:
        before = jobs[JobState(state)]
        with driver.transaction() as ex:
            job = driver.job_requeue(ex, before.id, REQUEUEABLE)
        assert job is not None and job == get(driver, before.id)
        assert (job.state, job.stage, job.attempt, job.worker_id) == (
            JobState.QUEUED,
            None,
            0,
            None,
        )
        assert job.finished_at is job.lease_expires_at is None
        assert (job.last_error_code, job.last_error, job.result) == (None, None, None)
        assert job.cancel_requested is False and near(job.run_at, ago(0))
        # claim_version never goes back: a stale holder stays fenced out.
        assert job.claim_version == before.claim_version
        assert (job.args, job.queue, job.max_attempts) == (
            before.args,
            before.queue,
            before.max_attempts,
        )


def test_job_requeue_leaves_a_running_job_alone(driver: Driver, new_job: JobFactory) -> None:
    jobs = _in_every_state(driver, new_job)
    running = jobs[JobState.RUNNING]
    with driver.transaction() as ex:
        assert driver.job_requeue(ex, running.id, REQUEUEABLE) is None
        assert driver.job_requeue(ex, jobs[JobState.DEAD_LETTER].id, ["succeeded"]) is None
        assert driver.job_requeue(ex, 999_999, REQUEUEABLE) is None
    assert get(driver, running.id) == running
    assert get(driver, jobs[JobState.DEAD_LETTER].id) == jobs[JobState.DEAD_LETTER]


def test_job_requeue_makes_the_job_claimable_now(driver: Driver, new_job: JobFactory) -> None:
    jobs = _in_every_state(driver, new_job)
    dead = jobs[JobState.DEAD_LETTER]
    with driver.transaction() as ex:
        driver.job_requeue(ex, dead.id, REQUEUEABLE)
    again = claim_one(driver)
    assert (again.id, again.attempt, again.claim_version) == (dead.id, 1, dead.claim_version + 1)
