"""The lease: claim, heartbeat, stage and finish, every write fenced by claim_version."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest

from durq import states
from durq._drivers import Driver, FinishRequest
from durq._drivers.postgres.driver import PostgresDriver
from durq.errors import LeaseLost
from durq.types import Artifact, Finished, Job, JobState

from ..waiting import wait_until
from .helpers import (
    JSONB_NUMBERS_REASON,
    JobFactory,
    PlainSql,
    about,
    ago,
    claim,
    claim_one,
    finish,
    get,
    insert,
    near,
    request,
)


def _held(driver: Driver, new_job: JobFactory, n: int = 1, **options: Any) -> list[Job]:
    """``n`` new jobs, claimed."""
    for _ in range(n):
        insert(driver, new_job(**options))
    return claim(driver, queue=options.get("queue", "default"), limit=n)


def _lease(job: Job) -> timedelta:
    """How long the lease runs from the last heartbeat."""
    assert job.lease_expires_at is not None and job.heartbeat_at is not None
    return job.lease_expires_at - job.heartbeat_at


# ---- claim ---------------------------------------------------------------------------


def test_job_claim_starts_an_attempt_on_a_ready_job(driver: Driver, new_job: JobFactory) -> None:
    queued = insert(driver, new_job("t", {"x": 1}))
    with driver.transaction() as ex:
        (job,) = driver.job_claim(ex, queue="default", worker_id="w7", limit=5, lease_seconds=45)
    assert job.id == queued.id and job.args == {"x": 1}
    assert (job.state, job.stage, job.worker_id) == (JobState.RUNNING, None, "w7")
    assert (job.attempt, job.claim_version, job.cancel_requested) == (1, 1, False)
    assert job.attempted_at is not None and job.attempted_at == job.heartbeat_at
    assert _lease(job) == about(45)
    assert near(job.attempted_at, ago(0))
    assert get(driver, job.id) == job


def test_job_claim_picks_by_priority_then_run_at_then_id(
    driver: Driver, new_job: JobFactory
) -> None:
    old, older = ago(10), ago(20)
    late_low = insert(driver, new_job(priority=5, run_at=older))
    first_high_new = insert(driver, new_job(priority=1, run_at=old))
    high_old = insert(driver, new_job(priority=1, run_at=older))
    second_high_new = insert(driver, new_job(priority=1, run_at=old))
    urgent = insert(driver, new_job(priority=-2, run_at=old))
    picked = [claim_one(driver).id for _ in range(5)]
    assert picked == [urgent.id, high_old.id, first_high_new.id, second_high_new.id, late_low.id]
    assert claim(driver) == []


def test_job_claim_returns_the_jobs_in_the_order_it_picked_them(
    driver: Driver, new_job: JobFactory
) -> None:
    for priority in (5, 3, 1, 4, 2):
        insert(driver, new_job(priority=priority))
    assert [j.priority for j in claim(driver, limit=5)] == [1, 2, 3, 4, 5]


def test_job_claim_takes_at_most_limit_jobs(driver: Driver, new_job: JobFactory) -> None:
    for _ in range(5):
        insert(driver, new_job())
    assert len(claim(driver, limit=3)) == 3
    assert len(claim(driver, limit=3)) == 2
    assert claim(driver, limit=3) == []


def test_job_claim_skips_paused_queues(driver: Driver, new_job: JobFactory) -> None:
    job = insert(driver, new_job(queue="q"))
    with driver.transaction() as ex:
        driver.queue_set_paused(ex, "q", True)
        driver.queue_set_paused(ex, "other", True)
    assert claim(driver, queue="q") == []
    with driver.transaction() as ex:
        driver.queue_set_paused(ex, "q", False)
    assert [j.id for j in claim(driver, queue="q")] == [job.id]


def test_job_claim_skips_jobs_not_yet_due(driver: Driver, new_job: JobFactory) -> None:
    insert(driver, new_job(delay=60))
    due = insert(driver, new_job(run_at=ago(1)))
    assert [j.id for j in claim(driver)] == [due.id]
    assert claim(driver) == []


def test_job_claim_skips_other_queues(driver: Driver, new_job: JobFactory) -> None:
    mine = insert(driver, new_job(queue="mine"))
    theirs = insert(driver, new_job(queue="theirs"))
    assert [j.id for j in claim(driver, queue="mine")] == [mine.id]
    assert claim(driver, queue="mine") == []
    assert get(driver, theirs.id).state == JobState.QUEUED


def test_job_claim_skips_running_and_finished_jobs(driver: Driver, new_job: JobFactory) -> None:
    running, done, dead, cancelled = _held(driver, new_job, 4)
    finish(driver, done, states.complete())
    finish(driver, dead, states.dead_letter("x", "y"))
    with driver.transaction() as ex:
        driver.job_cancel_running(ex, cancelled.id)
    finish(driver, cancelled, states.cancel_running())
    assert claim(driver) == []
    assert get(driver, running.id).claim_version == 1


def test_job_claim_takes_retry_wait_jobs_again(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job, max_attempts=3)
    finish(driver, job, states.retry(0, "E", "again"))
    again = claim_one(driver)
    assert (again.id, again.attempt, again.claim_version) == (job.id, 2, 2)
    assert again.last_error_code == "E"  # the last error stays until the next outcome


def test_job_claim_hands_each_job_to_one_claimer(driver: Driver, new_job: JobFactory) -> None:
    with driver.transaction() as ex:
        driver.job_insert_many(ex, [new_job(args={"i": i}) for i in range(40)])
    taken: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def claimer(mine: list[int], worker: str) -> None:
        try:
            while batch := claim(driver, worker=worker, limit=3):
                mine.extend(j.id for j in batch)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(taken[i], f"w{i}")) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    every = [job_id for ids in taken for job_id in ids]
    assert len(every) == len(set(every)) == 40


def test_job_claim_id_claims_the_named_ready_job(driver: Driver, new_job: JobFactory) -> None:
    first, second = insert(driver, new_job()), insert(driver, new_job(priority=-1))
    with driver.transaction() as ex:
        job = driver.job_claim_id(ex, first.id, worker_id="sync", lease_seconds=12)
    assert job is not None and job.id == first.id
    assert (job.state, job.worker_id, job.attempt, job.claim_version) == ("running", "sync", 1, 1)
    assert job.attempted_at is not None
    assert _lease(job) == about(12)
    assert get(driver, first.id) == job
    assert get(driver, second.id).state == JobState.QUEUED


def test_job_claim_id_returns_none_unless_the_job_is_ready(
    driver: Driver, new_job: JobFactory
) -> None:
    later = insert(driver, new_job(delay=60))
    (running,) = _held(driver, new_job)
    (done,) = _held(driver, new_job)
    finish(driver, done, states.complete())
    for job_id in (later.id, running.id, done.id, 999_999):
        before = None if job_id == 999_999 else get(driver, job_id)
        with driver.transaction() as ex:
            assert driver.job_claim_id(ex, job_id, worker_id="w", lease_seconds=10) is None
        if before is not None:
            assert get(driver, job_id) == before


# ---- heartbeat -----------------------------------------------------------------------


def test_job_heartbeat_extends_a_held_lease(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        assert driver.job_heartbeat(ex, job.id, job.claim_version, 600) is False
    now = get(driver, job.id)
    assert now.heartbeat_at is not None and job.heartbeat_at is not None
    assert now.heartbeat_at >= job.heartbeat_at
    assert _lease(now) == about(600)
    assert (now.state, now.claim_version, now.attempt) == (job.state, job.claim_version, 1)


def test_job_heartbeat_with_a_stale_claim_version_returns_none_and_changes_nothing(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        assert driver.job_heartbeat(ex, job.id, job.claim_version - 1, 600) is None
        assert driver.job_heartbeat(ex, job.id, job.claim_version + 1, 600) is None
    assert get(driver, job.id) == job


def test_job_heartbeat_of_a_job_no_longer_running_returns_none(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    finish(driver, job, states.complete())
    with driver.transaction() as ex:
        assert driver.job_heartbeat(ex, job.id, job.claim_version, 600) is None
        assert driver.job_heartbeat(ex, 999_999, 1, 600) is None
    assert get(driver, job.id).lease_expires_at is None


def test_job_heartbeat_reports_a_requested_cancel(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        driver.job_cancel_running(ex, job.id)
        assert driver.job_heartbeat(ex, job.id, job.claim_version, 30) is True


def test_job_heartbeat_many_returns_only_held_leases(driver: Driver, new_job: JobFactory) -> None:
    held, cancelling, stale, done = _held(driver, new_job, 4)
    finish(driver, done, states.complete())
    with driver.transaction() as ex:
        driver.job_cancel_running(ex, cancelling.id)
    pairs = [
        (held.id, held.claim_version),
        (cancelling.id, cancelling.claim_version),
        (stale.id, stale.claim_version + 1),
        (done.id, done.claim_version),
        (999_999, 1),
    ]
    with driver.transaction() as ex:
        answer = driver.job_heartbeat_many(ex, pairs, 900)
    assert answer == {held.id: False, cancelling.id: True}
    for job in (held, cancelling):
        now = get(driver, job.id)
        assert _lease(now) == about(900)
    assert get(driver, stale.id).lease_expires_at == stale.lease_expires_at


def test_job_heartbeat_many_of_nothing_is_empty(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.job_heartbeat_many(ex, [], 30) == {}


# ---- stages --------------------------------------------------------------------------


def test_job_set_stage_moves_from_the_expected_stage(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        first = driver.job_set_stage(
            ex,
            job_id=job.id,
            claim_version=job.claim_version,
            stage="fetch",
            expected_stage=None,
            lease_seconds=500,
        )
    assert first is False
    fetched = get(driver, job.id)
    assert fetched.stage == "fetch"
    assert _lease(fetched) == about(500)
    with driver.transaction() as ex:
        second = driver.job_set_stage(
            ex,
            job_id=job.id,
            claim_version=job.claim_version,
            stage="encode",
            expected_stage="fetch",
            lease_seconds=500,
        )
    assert second is False and get(driver, job.id).stage == "encode"


def test_job_set_stage_from_another_stage_returns_none_and_changes_nothing(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    for expected in ("fetch", "encode"):  # the job is at no stage yet, then at "fetch"
        before = get(driver, job.id)
        with driver.transaction() as ex:
            assert (
                driver.job_set_stage(
                    ex,
                    job_id=job.id,
                    claim_version=job.claim_version,
                    stage="done",
                    expected_stage=expected,
                    lease_seconds=30,
                )
                is None
            )
        assert get(driver, job.id) == before
        with driver.transaction() as ex:
            driver.job_set_stage(
                ex,
                job_id=job.id,
                claim_version=job.claim_version,
                stage="fetch",
                expected_stage=None,
                lease_seconds=30,
            )


def test_job_set_stage_with_a_stale_claim_version_returns_none(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        moved = driver.job_set_stage(
            ex,
            job_id=job.id,
            claim_version=job.claim_version + 1,
            stage="fetch",
            expected_stage=None,
            lease_seconds=30,
        )
    assert moved is None and get(driver, job.id) == job


def test_job_set_stage_reports_a_requested_cancel(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        driver.job_cancel_running(ex, job.id)
        moved = driver.job_set_stage(
            ex,
            job_id=job.id,
            claim_version=job.claim_version,
            stage="fetch",
            expected_stage=None,
            lease_seconds=30,
        )
    assert moved is True and get(driver, job.id).stage == "fetch"


# ---- finish: one outcome -------------------------------------------------------------


def test_job_finish_complete_stores_the_result_and_an_attempt(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        driver.job_set_stage(
            ex,
            job_id=job.id,
            claim_version=1,
            stage="s",
            expected_stage=None,
            lease_seconds=30,
        )
        done = driver.job_finish(ex, request(job, states.complete({"out": [1, 2]}), runtime_ms=42))
    assert done is not None and done == get(driver, job.id)
    assert (done.state, done.result, done.stage) == (JobState.SUCCEEDED, {"out": [1, 2]}, None)
    assert (done.attempt, done.claim_version) == (1, 1)
    assert done.finished_at is not None and done.lease_expires_at is None
    assert done.last_error_code is done.last_error is None
    with driver.read() as ex:
        (attempt,) = driver.attempt_list(ex, job.id)
    assert (attempt.outcome, attempt.attempt, attempt.claim_version) == ("succeeded", 1, 1)
    assert (attempt.worker_id, attempt.runtime_ms) == ("w1", 42)


def test_job_finish_retry_schedules_the_next_attempt(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job, max_attempts=3)
    done = finish(driver, job, states.retry(120, "Timeout", "too slow"))
    assert done is not None and done == get(driver, job.id)
    assert (done.state, done.attempt, done.finished_at) == (JobState.RETRY_WAIT, 1, None)
    assert (done.last_error_code, done.last_error) == ("Timeout", "too slow")
    assert near(done.run_at, ago(-120))
    with driver.read() as ex:
        (attempt,) = driver.attempt_list(ex, job.id)
    assert (attempt.outcome, attempt.error_code, attempt.error_message) == (
        "failed",
        "Timeout",
        "too slow",
    )


def test_job_finish_dead_letter_ends_the_job(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    done = finish(driver, job, states.dead_letter("Fatal", "no way"))
    assert done is not None and done.state == JobState.DEAD_LETTER
    assert done.finished_at is not None and done.run_at == job.run_at


def test_job_finish_snooze_refunds_the_attempt(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    done = finish(driver, job, states.snooze(300))
    assert done is not None
    assert (done.state, done.attempt, done.claim_version) == (JobState.QUEUED, 0, 1)
    assert near(done.run_at, ago(-300)) and done.finished_at is None
    with driver.read() as ex:
        (attempt,) = driver.attempt_list(ex, job.id)
    assert (attempt.outcome, attempt.attempt) == ("snoozed", 1)


def test_job_finish_release_requeues_now_without_spending_an_attempt(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    done = finish(driver, job, states.release())
    assert done is not None
    assert (done.state, done.attempt, done.last_error_code) == (JobState.QUEUED, 0, "released")
    assert near(done.run_at, ago(0))
    assert [j.id for j in claim(driver)] == [job.id]


def test_job_finish_of_a_lost_lease_bumps_the_claim_version(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job, max_attempts=3)
    done = finish(driver, job, states.retry(0, "lease_expired", "gone", lost=True))
    assert done is not None
    assert (done.state, done.claim_version) == (JobState.RETRY_WAIT, job.claim_version + 1)
    with driver.read() as ex:
        (attempt,) = driver.attempt_list(ex, job.id)
    assert (attempt.outcome, attempt.claim_version) == ("lost", job.claim_version)


def test_job_finish_cancel_running_cancels(driver: Driver, new_job: JobFactory) -> None:
    (job,) = _held(driver, new_job)
    done = finish(driver, job, states.cancel_running())
    assert done is not None and done.state == JobState.CANCELLED and done.finished_at is not None


def test_job_finish_with_a_stale_claim_version_returns_none_and_changes_nothing(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    (job,) = _held(driver, new_job)
    for change in (states.complete("late"), states.retry(0, "E", "m"), states.cancel_running()):
        assert finish(driver, job, change, version=job.claim_version - 1) is None
        assert finish(driver, job, change, version=job.claim_version + 1) is None
    assert get(driver, job.id) == job
    assert sql.scalar("SELECT count(*) FROM durq_attempts") == 0


def test_job_finish_of_a_job_no_longer_running_returns_none(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    first = finish(driver, job, states.complete(1))
    assert finish(driver, job, states.dead_letter("late", "late")) is None
    assert get(driver, job.id) == first
    with driver.read() as ex:
        assert len(driver.attempt_list(ex, job.id)) == 1


def test_job_finish_honours_a_requested_cancel_over_a_failure(
    driver: Driver, new_job: JobFactory
) -> None:
    retried, snoozed = _held(driver, new_job, 2, max_attempts=5)
    with driver.transaction() as ex:
        driver.job_cancel_running(ex, retried.id)
        driver.job_cancel_running(ex, snoozed.id)
    for job, change in ((retried, states.retry(0, "E", "m")), (snoozed, states.snooze(5))):
        done = finish(driver, job, change)
        assert done is not None and done.state == JobState.CANCELLED
        assert done.finished_at is not None
        with driver.read() as ex:
            (attempt,) = driver.attempt_list(ex, job.id)
        assert attempt.outcome == "cancelled"


def test_job_finish_success_wins_over_a_requested_cancel(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job)
    with driver.transaction() as ex:
        driver.job_cancel_running(ex, job.id)
    done = finish(driver, job, states.complete("made it"))
    assert done is not None and (done.state, done.result) == (JobState.SUCCEEDED, "made it")


def test_job_finish_writes_artifacts_only_on_success(driver: Driver, new_job: JobFactory) -> None:
    ok, failed = _held(driver, new_job, 2, max_attempts=3)
    artifacts = [Artifact("thumb", {"w": 1}, "ref-1"), Artifact("log", "text")]
    finish(driver, ok, states.complete(), artifacts=artifacts)
    finish(driver, failed, states.retry(0, "E", "m"), artifacts=artifacts)
    with driver.read() as ex:
        stored = driver.artifact_list(ex, ok.id)
        assert driver.artifact_list(ex, failed.id) == []
    assert [(a.artifact_type, a.payload, a.ref) for a in stored] == [
        ("thumb", {"w": 1}, "ref-1"),
        ("log", "text", None),
    ]


RESULTS: list[Any] = [None, 0, False, "", "null", "text", [1, "a"], {"k": {"n": 1.5}}]


def test_job_finish_stores_any_json_result(driver: Driver, new_job: JobFactory) -> None:
    jobs = _held(driver, new_job, len(RESULTS))
    for job, result in zip(jobs, RESULTS, strict=True):
        finish(driver, job, states.complete(result))
    assert [get(driver, j.id).result for j in jobs] == RESULTS


def test_job_finish_stores_float_results_as_floats(
    driver: Driver, new_job: JobFactory, request: pytest.FixtureRequest
) -> None:
    if driver.dialect == "postgresql":
        request.applymarker(pytest.mark.xfail(strict=True, reason=JSONB_NUMBERS_REASON))
    (job,) = _held(driver, new_job)
    finish(driver, job, states.complete({"bytes": 3e16}))
    result = get(driver, job.id).result
    assert result == {"bytes": 3e16} and isinstance(result["bytes"], float)


# ---- finish: a batch -----------------------------------------------------------------


def test_job_finish_many_reports_each_outcome_or_a_lost_lease(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    ok, retried, stale, snoozed = _held(driver, new_job, 4, max_attempts=3)
    reqs = [
        request(ok, states.complete({"r": 1})),
        request(retried, states.retry(60, "E", "msg")),
        request(stale, states.complete(), version=stale.claim_version + 1),
        request(snoozed, states.snooze(30)),
    ]
    with driver.transaction() as ex:
        out = driver.job_finish_many(ex, reqs)
    assert [type(o) for o in out] == [Finished, Finished, LeaseLost, Finished]
    for answer, job in zip(out, (ok, retried, stale, snoozed), strict=True):
        if isinstance(answer, Finished):
            assert answer == Finished.of(get(driver, job.id))
    lost = out[2]
    assert isinstance(lost, LeaseLost)
    assert (lost.job_id, lost.claim_version) == (stale.id, stale.claim_version + 1)
    assert get(driver, stale.id) == stale
    assert [get(driver, j.id).state for j in (ok, retried, snoozed)] == [
        "succeeded",
        "retry_wait",
        "queued",
    ]
    assert get(driver, ok.id).result == {"r": 1}
    # The success is stored on its job row; the other outcomes have their records.
    rows = sql.rows("SELECT job_id, outcome FROM durq_attempts ORDER BY job_id")
    assert [(r["job_id"], r["outcome"]) for r in rows] == [
        (retried.id, "failed"),
        (snoozed.id, "snoozed"),
    ]
    with driver.read() as ex:
        assert [a.outcome for a in driver.attempt_list(ex, ok.id)] == ["succeeded"]
        assert driver.attempt_list(ex, stale.id) == []


@pytest.mark.xfail(
    strict=True,
    reason="the one-statement batches (PostgreSQL's and SQLite's job_finish_many) match a "
    "job once however many requests name it, then report every request for that job as "
    "Finished; one by one, the second write finds the job no longer running and reports "
    "LeaseLost. Which outcome is stored differs too: PostgreSQL kept the first, SQLite the "
    "last (an UPDATE ... FROM takes an arbitrary matching request row)",
)
def test_job_finish_many_answers_a_repeated_job_like_job_finish_does(
    driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(driver, new_job, max_attempts=3)
    with driver.transaction() as ex:
        out = driver.job_finish_many(
            ex, [request(job, states.complete(1)), request(job, states.retry(0, "E", "m"))]
        )
    assert isinstance(out[0], Finished) and out[0].state == JobState.SUCCEEDED
    assert isinstance(out[1], LeaseLost)
    assert get(driver, job.id).state == JobState.SUCCEEDED


def test_job_finish_many_of_nothing_is_empty(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.job_finish_many(ex, []) == []


def test_job_finish_many_with_artifacts_stores_them(driver: Driver, new_job: JobFactory) -> None:
    ok, failed = _held(driver, new_job, 2, max_attempts=3)
    art = [Artifact("a", {"v": 1})]
    with driver.transaction() as ex:
        out = driver.job_finish_many(
            ex,
            [
                request(ok, states.complete(), artifacts=art),
                request(failed, states.retry(0, "E", "m"), artifacts=art),
            ],
        )
    assert [o.state for o in out if isinstance(o, Finished)] == ["succeeded", "retry_wait"]
    with driver.read() as ex:
        assert [a.payload for a in driver.artifact_list(ex, ok.id)] == [{"v": 1}]
        assert driver.artifact_list(ex, failed.id) == []


def _outcome_changes() -> list[states.Change]:
    return [
        states.complete({"k": [1]}),
        *(states.complete(r) for r in RESULTS),
        states.retry(30, "E", "failed once"),
        states.retry(0, "lease_expired", "lost", lost=True),
        states.dead_letter("Fatal", "no"),
        states.dead_letter("lease_expired", "lost", lost=True),
        states.snooze(45),
        states.release(),
        states.cancel_running(),
    ]


def _comparable(job: Job) -> tuple[Any, ...]:
    return (
        job.state,
        job.stage,
        job.attempt,
        job.claim_version,
        job.last_error_code,
        job.last_error,
        job.result,
        job.finished_at is None,
        job.lease_expires_at,
        round((job.run_at - job.updated_at).total_seconds()),
    )


@pytest.mark.parametrize("cancel_first", [False, True], ids=["plain", "cancel-requested"])
def test_job_finish_many_writes_what_job_finish_writes(
    driver: Driver, new_job: JobFactory, sql: PlainSql, cancel_first: bool
) -> None:
    changes = _outcome_changes()
    one_by_one = _held(driver, new_job, len(changes), queue="one", max_attempts=5)
    batched = _held(driver, new_job, len(changes), queue="batch", max_attempts=5)
    if cancel_first:
        with driver.transaction() as ex:
            for job in one_by_one + batched:
                driver.job_cancel_running(ex, job.id)
    for job, change in zip(one_by_one, changes, strict=True):
        assert finish(driver, job, change, worker="wx", runtime_ms=9) is not None
    with driver.transaction() as ex:
        out = driver.job_finish_many(
            ex,
            [
                request(job, change, worker="wx", runtime_ms=9)
                for job, change in zip(batched, changes, strict=True)
            ],
        )
    assert all(isinstance(o, Finished) for o in out)
    singles = [_comparable(get(driver, j.id)) for j in one_by_one]
    batches = [_comparable(get(driver, j.id)) for j in batched]
    assert batches == singles

    def attempts(jobs: list[Job]) -> list[tuple[Any, ...]]:
        found = []
        for job in jobs:
            with driver.read() as ex:
                (a,) = driver.attempt_list(ex, job.id)
            assert a.started_at == job.attempted_at
            found.append(
                (
                    a.attempt,
                    a.claim_version,
                    a.worker_id,
                    a.runtime_ms,
                    a.outcome,
                    a.error_code,
                    a.error_message,
                )
            )
        return found

    assert attempts(batched) == attempts(one_by_one)


def test_finish_batch_commits_in_a_transaction_of_its_own(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    ok, stale = _held(driver, new_job, 2)
    out = driver.finish_batch(
        [request(ok, states.complete(7)), request(stale, states.complete(), version=99)]
    )
    assert isinstance(out[0], Finished) and out[0].state == JobState.SUCCEEDED
    assert isinstance(out[1], LeaseLost) and out[1].job_id == stale.id
    # Committed: another connection sees it.
    row = sql.one("SELECT state, claim_version, runtime_ms FROM durq_jobs WHERE id = :id", id=ok.id)
    assert (row["state"], row["claim_version"], row["runtime_ms"]) == ("succeeded", 1, 5)


def test_finish_many_params_encodes_the_batch_as_json_rows() -> None:
    reqs = [
        FinishRequest(7, 4, "w", states.complete({"a": 1}), 12),
        FinishRequest(8, 2, None, states.snooze(5), None),
        FinishRequest(9, 1, "w", states.retry(2, "E", "m"), 3, traceback="Traceback …"),
    ]
    params = PostgresDriver.finish_many_params(reqs)
    assert list(params) == ["batch"]
    assert json.loads(params["batch"]) == [
        [7, 4, "succeeded", 0, 0, None, None, None, {"a": 1}, "w", 12, "succeeded", None],
        [8, 2, "queued", 1, 0, 5.0, None, None, None, None, None, "snoozed", None],
        [9, 1, "retry_wait", 0, 0, 2.0, "E", "m", None, "w", 3, "failed", "Traceback …"],
    ]


# ---- expired leases ------------------------------------------------------------------


def test_job_expired_returns_running_jobs_whose_lease_ran_out(
    driver: Driver, new_job: JobFactory
) -> None:
    for _ in range(4):
        insert(driver, new_job())
    first = claim_one(driver, lease=0.05)
    second = claim_one(driver, lease=0.1)
    held = claim_one(driver, lease=600)
    done = claim_one(driver, lease=0.05)
    finish(driver, done, states.complete())
    found: list[Job] = []

    def both_expired() -> bool:
        with driver.transaction() as ex:
            found[:] = driver.job_expired(ex, limit=10)
        return len(found) == 2

    wait_until(both_expired, timeout=10, what="two leases to expire")
    assert [j.id for j in found] == [first.id, second.id]  # the oldest lease first
    assert found == [get(driver, first.id), get(driver, second.id)]  # read, not changed
    assert all(j.state == JobState.RUNNING for j in found)
    with driver.transaction() as ex:
        assert [j.id for j in driver.job_expired(ex, limit=1)] == [first.id]
    assert held.id not in [j.id for j in found]


# ---- reading back an outcome whose commit went unanswered --------------------------------


def test_attempt_outcome_names_what_the_claim_recorded(driver: Driver, new_job: JobFactory) -> None:
    job = _held(driver, new_job)[0]
    with driver.read() as ex:
        assert driver.attempt_outcome(ex, job.id, job.claim_version) is None  # still running
    finish(driver, job, states.complete({"ok": True}))
    with driver.read() as ex:
        assert driver.attempt_outcome(ex, job.id, job.claim_version) == "succeeded"
        assert driver.attempt_outcome(ex, job.id, job.claim_version + 1) is None
