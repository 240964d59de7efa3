"""Reads: one job, a filtered listing, its attempts and artifacts, the next due time, and
the row codec that turns any connection's rows into durq's types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from durq import states
from durq._drivers import Driver
from durq._drivers.rows import JOB_FIELDS
from durq.types import Artifact, Attempt, Finished, JobState

from .helpers import (
    JobFactory,
    PlainSql,
    ago,
    claim,
    claim_one,
    finish,
    get,
    insert,
    set_time,
)


def test_job_get_of_an_unknown_id_is_none(driver: Driver) -> None:
    with driver.read() as ex:
        assert driver.job_get(ex, 424242) is None


def test_job_get_returns_the_current_row(driver: Driver, new_job: JobFactory) -> None:
    queued = insert(driver, new_job("t", {"a": 1}))
    claimed = claim_one(driver)
    with driver.read() as ex:
        now = driver.job_get(ex, queued.id)
    assert now == claimed != queued
    assert now is not None and now.state == JobState.RUNNING and now.args == {"a": 1}


def test_tombstone_get_is_false_for_live_and_unknown_ids(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job())
    with driver.read() as ex:
        assert driver.tombstone_get(ex, job.id) is False
        assert driver.tombstone_get(ex, job.id + 1000) is False


def test_tombstone_get_is_true_once_the_job_is_pruned(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job())
    job = claim_one(driver)
    finish(driver, job, states.complete())
    set_time(sql, driver, "durq_jobs", "finished_at", ago(3600), where="id", key=job.id)
    with driver.transaction() as ex:
        assert driver.job_prune(ex, JobState.SUCCEEDED, older_than=60, limit=10) == 1
    with driver.read() as ex:
        assert driver.job_get(ex, job.id) is None
        assert driver.tombstone_get(ex, job.id) is True


def test_tombstone_owner_keeps_the_pruned_jobs_owner(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job(created_by="acme"))
    job = claim_one(driver)
    finish(driver, job, states.complete())
    set_time(sql, driver, "durq_jobs", "finished_at", ago(3600), where="id", key=job.id)
    with driver.read() as ex:
        assert driver.tombstone_owner(ex, job.id) is None  # live: no tombstone yet
    with driver.transaction() as ex:
        assert driver.job_prune(ex, JobState.SUCCEEDED, older_than=60, limit=10) == 1
    with driver.read() as ex:
        assert driver.tombstone_owner(ex, job.id) == "acme"
        assert driver.tombstone_owner(ex, job.id + 1000) is None


# ---- listing -------------------------------------------------------------------------


def test_job_list_filters_and_pages_newest_first(driver: Driver, new_job: JobFactory) -> None:
    # One transaction each: PostgreSQL's clock is the transaction's, and the created_at
    # filters need distinct times.
    a = insert(driver, new_job("resize", queue="img", created_by="ann"))
    b = insert(driver, new_job("resize", queue="img", created_by="bob"))
    c = insert(driver, new_job("send", queue="mail", created_by="ann"))
    d = insert(driver, new_job("send", queue="mail"))
    claim_one(driver, queue="mail")  # c is running now

    def ids(
        *,
        states_: list[str] | None = None,
        queue: str | None = None,
        task: str | None = None,
        created_by: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[int]:
        with driver.read() as ex:
            listed = driver.job_list(
                ex,
                states_=states_,
                queue=queue,
                task=task,
                created_by=created_by,
                created_after=created_after,
                created_before=created_before,
                before_id=before_id,
                limit=limit,
            )
        assert listed == [get(driver, j.id) for j in listed]  # whole rows, as stored
        return [j.id for j in listed]

    assert ids() == [d.id, c.id, b.id, a.id]
    assert ids(states_=["running"]) == [c.id]
    assert ids(states_=["queued", "retry_wait"]) == [d.id, b.id, a.id]
    assert ids(states_=[]) == []
    assert ids(queue="img") == [b.id, a.id]
    assert ids(task="send") == [d.id, c.id]
    assert ids(created_by="ann") == [c.id, a.id]
    just_before_b = b.created_at - timedelta(microseconds=1)
    assert ids(created_after=just_before_b) == [d.id, c.id, b.id]
    assert ids(created_before=just_before_b) == [a.id]
    assert ids(before_id=c.id, limit=1) == [b.id]
    assert ids(limit=2) == [d.id, c.id]
    assert ids(queue="img", created_by="bob", task="resize", states_=["queued"]) == [b.id]
    assert ids(queue="nowhere") == []


def test_job_count_counts_what_job_list_finds_across_pages(
    driver: Driver, new_job: JobFactory
) -> None:
    a = insert(driver, new_job("resize", queue="img", created_by="ann"))
    insert(driver, new_job("resize", queue="img", created_by="bob"))
    insert(driver, new_job("send", queue="mail", created_by="ann"))
    claim_one(driver, queue="mail")

    def count(**filters: object) -> int:
        base: dict[str, object] = {
            "states_": None,
            "queue": None,
            "task": None,
            "created_by": None,
            "created_after": None,
            "created_before": None,
        }
        with driver.read() as ex:
            return driver.job_count(ex, **(base | filters))  # type: ignore[arg-type]

    assert count() == 3
    assert count(states_=["queued"]) == 2
    assert count(states_=["running"], queue="mail") == 1
    assert count(created_by="ann") == 2
    assert count(task="resize", created_before=a.created_at) == 0
    assert count(queue="nowhere") == 0


def test_job_list_created_bounds_at_a_jobs_own_created_at(
    driver: Driver, new_job: JobFactory, sql: PlainSql, request: pytest.FixtureRequest
) -> None:
    # A job whose created_at, as read back, is later than what the database stored (on
    # SQLite one in three; on PostgreSQL, which keeps microseconds, none: any job will do).
    for _ in range(60):
        job = insert(driver, new_job())
        stored = sql.scalar("SELECT created_at FROM durq_jobs WHERE id = :id", id=job.id)
        if driver.dialect != "sqlite" or float(stored) < float(driver.ts_param(job.created_at)):
            break
    with driver.read() as ex:
        after = driver.job_list(
            ex,
            states_=None,
            queue=None,
            task=None,
            created_by=None,
            created_after=job.created_at,
            created_before=None,
            before_id=None,
            limit=100,
        )
        before = driver.job_list(
            ex,
            states_=None,
            queue=None,
            task=None,
            created_by=None,
            created_after=None,
            created_before=job.created_at,
            before_id=None,
            limit=100,
        )
    assert job.id in [j.id for j in after]  # created_after is inclusive
    assert job.id not in [j.id for j in before]  # created_before is exclusive


# ---- attempts and artifacts ----------------------------------------------------------


def test_attempt_list_is_empty_before_any_attempt(driver: Driver, new_job: JobFactory) -> None:
    job = insert(driver, new_job())
    with driver.read() as ex:
        assert driver.attempt_list(ex, job.id) == []


def test_attempt_list_has_one_record_per_finished_attempt_in_claim_order(
    driver: Driver, new_job: JobFactory
) -> None:
    insert(driver, new_job(max_attempts=3))
    first = claim_one(driver)
    finish(driver, first, states.retry(0, "Boom", "it broke"), worker="w1", runtime_ms=12)
    (second,) = claim(driver, worker="w2", limit=1)
    finish(driver, second, states.complete({"ok": 1}), worker="w2", runtime_ms=None)
    with driver.read() as ex:
        attempts = driver.attempt_list(ex, first.id)
    assert [(a.attempt, a.claim_version, a.worker_id) for a in attempts] == [
        (1, 1, "w1"),
        (2, 2, "w2"),
    ]
    failed, succeeded = attempts
    assert (failed.outcome, failed.error_code, failed.error_message) == (
        "failed",
        "Boom",
        "it broke",
    )
    assert (succeeded.outcome, succeeded.error_code, succeeded.error_message) == (
        "succeeded",
        None,
        None,
    )
    assert (failed.runtime_ms, succeeded.runtime_ms) == (12, None)
    assert failed.started_at == first.attempted_at and succeeded.started_at == second.attempted_at
    assert failed.started_at is not None and failed.finished_at >= failed.started_at
    assert all(a.job_id == first.id for a in attempts)


def test_artifact_insert_stores_and_artifact_list_reads_in_order(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job())
    other = insert(driver, new_job())
    with driver.transaction() as ex:
        driver.artifact_insert(ex, job.id, Artifact("thumb", {"w": 64, "tags": ["a"]}, "s3://b/1"))
        driver.artifact_insert(ex, job.id, Artifact("log", None, None))
        driver.artifact_insert(ex, other.id, Artifact("other", 1))
    with driver.read() as ex:
        listed = driver.artifact_list(ex, job.id)
    assert [(a.artifact_type, a.payload, a.ref, a.job_id) for a in listed] == [
        ("thumb", {"w": 64, "tags": ["a"]}, "s3://b/1", job.id),
        ("log", None, None, job.id),
    ]
    now = datetime.now(UTC)
    assert all(a.created_at is not None and abs(a.created_at - now) < timedelta(5) for a in listed)


def test_artifact_list_of_a_job_without_artifacts_is_empty(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job())
    with driver.read() as ex:
        assert driver.artifact_list(ex, job.id) == []


# ---- the next scheduled job ----------------------------------------------------------


def test_job_next_due_is_none_without_scheduled_jobs(driver: Driver, new_job: JobFactory) -> None:
    insert(driver, new_job())  # ready now: not "next due"
    with driver.read() as ex:
        assert driver.job_next_due(ex, ["default"]) is None
        assert driver.job_next_due(ex, []) is None


def test_job_next_due_is_the_wait_for_the_earliest_job_of_those_queues(
    driver: Driver, new_job: JobFactory
) -> None:
    insert(driver, new_job(queue="a", delay=300))
    insert(driver, new_job(queue="a", delay=100))
    insert(driver, new_job(queue="b", delay=30))
    insert(driver, new_job(queue="c", delay=5))
    done = insert(driver, new_job(queue="d", delay=0))
    with driver.transaction() as ex:  # a job that is not waiting does not count
        driver.job_cancel_ready(ex, done.id, ["queued"])
    with driver.read() as ex:
        only_a = driver.job_next_due(ex, ["a"])
        a_or_b = driver.job_next_due(ex, ["a", "b"])
        none = driver.job_next_due(ex, ["d", "nowhere"])
    assert only_a is not None and 95 < only_a <= 100
    assert a_or_b is not None and 25 < a_or_b <= 30
    assert none is None


# ---- the row codec: rows from any connection -----------------------------------------


def test_job_from_row_decodes_a_row_read_by_plain_sql(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job("t", {"deep": {"list": [1, 2]}}, created_by="x"))
    job = claim_one(driver)
    row = sql.one("SELECT * FROM durq_jobs WHERE id = :id", id=job.id)
    decoded = driver.job_from_row(row)
    assert decoded == get(driver, job.id) == job
    assert isinstance(decoded.cancel_requested, bool) and decoded.args == {"deep": {"list": [1, 2]}}
    assert decoded.lease_expires_at is not None and decoded.lease_expires_at.tzinfo is not None


def test_job_from_values_decodes_columns_in_job_field_order(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job("t", {"k": "v"}, priority=4))
    job = claim_one(driver)
    finish(driver, job, states.complete(["r", 1]))
    row = sql.one(f"SELECT {', '.join(JOB_FIELDS)} FROM durq_jobs WHERE id = :id", id=job.id)
    decoded = driver.job_from_values(list(row.values()))
    assert decoded == get(driver, job.id)
    assert (decoded.state, decoded.result, decoded.priority) == (JobState.SUCCEEDED, ["r", 1], 4)


def test_finished_from_row_decodes_an_outcome(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job())
    job = claim_one(driver)
    done = finish(driver, job, states.dead_letter("Bad", "bad input"))
    assert done is not None
    row = sql.one(
        "SELECT id, state, run_at, last_error_code, last_error FROM durq_jobs WHERE id = :id",
        id=job.id,
    )
    finished = driver.finished_from_row(row)
    assert finished == Finished.of(done)
    assert (finished.state, finished.last_error_code, finished.last_error) == (
        JobState.DEAD_LETTER,
        "Bad",
        "bad input",
    )


def test_attempt_from_row_decodes_an_attempt_record(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job(max_attempts=3))
    (job,) = claim(driver, worker="w9", limit=1)
    finish(driver, job, states.retry(0, "Boom", "it broke"), worker="w9", runtime_ms=33)
    row = sql.one("SELECT * FROM durq_attempts WHERE job_id = :id", id=job.id)
    attempt = driver.attempt_from_row(row)
    with driver.read() as ex:
        assert [attempt] == driver.attempt_list(ex, job.id)
    assert attempt == Attempt(
        job_id=job.id,
        attempt=1,
        claim_version=1,
        worker_id="w9",
        started_at=job.attempted_at,
        finished_at=attempt.finished_at,
        runtime_ms=33,
        outcome="failed",
        error_code="Boom",
        error_message="it broke",
    )


def test_artifact_from_row_decodes_an_artifact(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    job = insert(driver, new_job())
    with driver.transaction() as ex:
        driver.artifact_insert(ex, job.id, Artifact("report", {"pages": 3}, "file:///r.pdf"))
    row = sql.one("SELECT * FROM durq_artifacts WHERE job_id = :id", id=job.id)
    artifact = driver.artifact_from_row(row)
    with driver.read() as ex:
        assert [artifact] == driver.artifact_list(ex, job.id)
    assert (artifact.artifact_type, artifact.payload, artifact.ref, artifact.job_id) == (
        "report",
        {"pages": 3},
        "file:///r.pdf",
        job.id,
    )
