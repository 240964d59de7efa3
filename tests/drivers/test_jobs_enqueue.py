"""Enqueue: inserting jobs, deleting one, and the idempotency key bookkeeping."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from durq import states
from durq._drivers import Driver
from durq.types import Artifact, JobState

from .helpers import JSONB_NUMBERS_REASON, JobFactory, PlainSql, claim_one, finish, get, insert


def test_job_insert_returns_the_row_as_stored(driver: Driver, new_job: JobFactory) -> None:
    new = new_job(
        "mail.send",
        {"to": "a@example.com", "cc": ["b", "c"], "n": 1.5, "flag": True, "none": None},
        queue="mail",
        priority=-3,
        max_attempts=4,
        created_by="alice",
    )
    with driver.transaction() as ex:
        job = driver.job_insert(ex, new)
        assert driver.job_get(ex, job.id) == job
    assert (job.queue, job.task, job.priority, job.max_attempts) == ("mail", "mail.send", -3, 4)
    assert job.args == {
        "to": "a@example.com",
        "cc": ["b", "c"],
        "n": 1.5,
        "flag": True,
        "none": None,
    }
    assert (job.state, job.stage, job.attempt, job.claim_version) == (JobState.QUEUED, None, 0, 0)
    assert (job.worker_id, job.created_by, job.idempotency_key) == (None, "alice", None)
    assert job.retry_policy == json.loads(new.retry_policy_json)
    assert job.run_at == job.created_at == job.updated_at  # no delay: due when created
    assert job.attempted_at is job.finished_at is job.lease_expires_at is None
    assert job.result is None and job.cancel_requested is False
    assert get(driver, job.id) == job  # committed


def test_job_insert_args_read_back_with_their_json_types(
    driver: Driver, new_job: JobFactory, request: pytest.FixtureRequest
) -> None:
    if driver.dialect == "postgresql":
        request.applymarker(pytest.mark.xfail(strict=True, reason=JSONB_NUMBERS_REASON))
    args = {"big": 1e20, "huge": 1e300, "small": 1e-7, "one": 1.0, "int": 2**70, "s": "é✓"}
    job = insert(driver, new_job("t", args))
    stored = get(driver, job.id).args
    assert stored == job.args == args
    assert {k: type(v) for k, v in stored.items()} == {k: type(v) for k, v in args.items()}


def test_job_insert_with_delay_schedules_after_creation(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job(delay=90))
    assert abs((job.run_at - job.created_at).total_seconds() - 90) < 0.01
    assert get(driver, job.id).run_at == job.run_at


def test_job_insert_with_run_at_keeps_it(driver: Driver, new_job: JobFactory) -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    job = insert(driver, new_job(run_at=when))
    assert job.run_at == when and job.run_at.tzinfo is not None
    assert get(driver, job.id).run_at == when


def test_job_insert_keeps_the_idempotency_key_and_increasing_ids(
    driver: Driver, new_job: JobFactory
) -> None:
    first = insert(driver, new_job(idempotency_key="k-1"))
    second = insert(driver, new_job())
    assert first.idempotency_key == "k-1" == get(driver, first.id).idempotency_key
    assert second.id > first.id


def test_job_insert_many_returns_the_jobs_in_request_order(
    driver: Driver, new_job: JobFactory
) -> None:
    # Jobs that run now: PostgreSQL takes its COPY path here.
    news = [new_job(f"task{i}", {"i": i}, queue=f"q{i % 2}", priority=5 - i) for i in range(6)]
    with driver.transaction() as ex:
        jobs = driver.job_insert_many(ex, news)
    assert [(j.task, j.args, j.queue, j.priority) for j in jobs] == [
        (n.task, json.loads(n.args_json), n.queue, n.priority) for n in news
    ]
    assert [j.id for j in jobs] == sorted({j.id for j in jobs})
    assert all(j.state == JobState.QUEUED and j.run_at == j.created_at for j in jobs)
    assert [get(driver, j.id) for j in jobs] == jobs


def test_job_insert_many_with_schedules_returns_the_stored_rows(
    driver: Driver, new_job: JobFactory
) -> None:
    # Scheduled jobs: PostgreSQL takes its multi-row INSERT path here.
    when = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    news = [new_job("a", delay=60), new_job("b", run_at=when), new_job("c", created_by="bob")]
    with driver.transaction() as ex:
        jobs = driver.job_insert_many(ex, news)
    assert [j.task for j in jobs] == ["a", "b", "c"]
    assert abs((jobs[0].run_at - jobs[0].created_at).total_seconds() - 60) < 0.01
    assert jobs[1].run_at == when
    assert jobs[2].created_by == "bob"
    assert [get(driver, j.id) for j in jobs] == jobs


def test_job_insert_many_of_nothing_inserts_nothing(driver: Driver, sql: PlainSql) -> None:
    with driver.transaction() as ex:
        assert driver.job_insert_many(ex, []) == []
    assert sql.scalar("SELECT count(*) FROM durq_jobs") == 0


@pytest.mark.parametrize("scheduled", [False, True], ids=["now", "scheduled"])
def test_job_insert_many_runs_in_the_callers_transaction(
    driver: Driver, new_job: JobFactory, sql: PlainSql, scheduled: bool
) -> None:
    news = [new_job(delay=5 if scheduled else None) for _ in range(3)]
    with pytest.raises(RuntimeError, match="abort"), driver.transaction() as ex:
        assert len(driver.job_insert_many(ex, news)) == 3
        raise RuntimeError("abort")
    assert sql.scalar("SELECT count(*) FROM durq_jobs") == 0


def test_job_delete_removes_the_row_and_leaves_no_tombstone(
    driver: Driver, new_job: JobFactory
) -> None:
    doomed, kept = insert(driver, new_job()), insert(driver, new_job())
    with driver.transaction() as ex:
        driver.job_delete(ex, doomed.id)
        driver.job_delete(ex, 987654)  # an unknown id: nothing to do, no error
    with driver.read() as ex:
        assert driver.job_get(ex, doomed.id) is None
        assert driver.tombstone_get(ex, doomed.id) is False
        assert driver.job_get(ex, kept.id) == kept


def test_job_delete_takes_the_artifacts_with_the_job(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job())
    job = claim_one(driver)
    finish(driver, job, states.complete(), artifacts=[Artifact("file", {"n": 1}, "s3://x")])
    with driver.transaction() as ex:
        driver.job_delete(ex, job.id)
    assert sql.scalar("SELECT count(*) FROM durq_artifacts WHERE job_id = :id", id=job.id) == 0


def test_job_delete_takes_the_attempts_with_the_job(
    driver: Driver, new_job: JobFactory, sql: PlainSql, request: pytest.FixtureRequest
) -> None:
    insert(driver, new_job())
    job = claim_one(driver)
    finish(driver, job, states.complete())
    with driver.transaction() as ex:
        driver.job_delete(ex, job.id)
    with driver.read() as ex:
        assert driver.attempt_list(ex, job.id) == []
    assert sql.scalar("SELECT count(*) FROM durq_attempts WHERE job_id = :id", id=job.id) == 0


# ---- idempotency keys ----------------------------------------------------------------


def test_idem_get_of_an_unknown_key_is_none(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.idem_get(ex, "scope", "nope") is None


def test_idem_get_reports_the_job_the_hash_and_expiry(driver: Driver, new_job: JobFactory) -> None:
    live, stale = insert(driver, new_job()), insert(driver, new_job())
    with driver.transaction() as ex:
        assert driver.idem_insert(
            ex, scope="s", key="live", args_hash="h1", job_id=live.id, ttl=3600
        )
        assert driver.idem_insert(
            ex, scope="s", key="stale", args_hash="h2", job_id=stale.id, ttl=0
        )
    with driver.transaction() as ex:
        found = driver.idem_get(ex, "s", "live")
        gone = driver.idem_get(ex, "s", "stale")
    assert found is not None and gone is not None
    assert (found["job_id"], found["args_hash"], bool(found["expired"])) == (live.id, "h1", False)
    assert (gone["job_id"], gone["args_hash"], bool(gone["expired"])) == (stale.id, "h2", True)


def test_idem_get_reports_expired_as_a_bool(
    driver: Driver, new_job: JobFactory, request: pytest.FixtureRequest
) -> None:
    job = insert(driver, new_job())
    with driver.transaction() as ex:
        driver.idem_insert(ex, scope="s", key="k", args_hash="h", job_id=job.id, ttl=3600)
        found = driver.idem_get(ex, "s", "k")
    assert found is not None and found["expired"] is False


def test_idem_insert_records_the_key(driver: Driver, new_job: JobFactory) -> None:
    job = insert(driver, new_job())
    with driver.transaction() as ex:
        won = driver.idem_insert(ex, scope="t", key="k", args_hash="abc", job_id=job.id, ttl=60)
    assert won is True
    with driver.transaction() as ex:
        found = driver.idem_get(ex, "t", "k")
    assert found is not None and (found["job_id"], found["args_hash"]) == (job.id, "abc")


def test_idem_insert_returns_false_for_a_key_held_by_another_row(
    driver: Driver, new_job: JobFactory
) -> None:
    first, second = insert(driver, new_job()), insert(driver, new_job())
    with driver.transaction() as ex:
        assert driver.idem_insert(ex, scope="t", key="k", args_hash="h1", job_id=first.id, ttl=60)
    with driver.transaction() as ex:
        won = driver.idem_insert(ex, scope="t", key="k", args_hash="h2", job_id=second.id, ttl=60)
        found = driver.idem_get(ex, "t", "k")
    assert won is False
    assert found is not None and (found["job_id"], found["args_hash"]) == (first.id, "h1")


def test_idem_insert_returns_false_for_an_expired_key_until_it_is_deleted(
    driver: Driver, new_job: JobFactory
) -> None:
    first, second = insert(driver, new_job()), insert(driver, new_job())
    with driver.transaction() as ex:
        assert driver.idem_insert(ex, scope="t", key="k", args_hash="h", job_id=first.id, ttl=0)
    with driver.transaction() as ex:
        assert not driver.idem_insert(
            ex, scope="t", key="k", args_hash="h", job_id=second.id, ttl=60
        )
        driver.idem_delete(ex, "t", "k")
        assert driver.idem_insert(ex, scope="t", key="k", args_hash="h", job_id=second.id, ttl=60)


def test_idem_insert_keeps_scopes_apart(driver: Driver, new_job: JobFactory) -> None:
    a, b = insert(driver, new_job()), insert(driver, new_job())
    with driver.transaction() as ex:
        assert driver.idem_insert(ex, scope="one", key="k", args_hash="h", job_id=a.id, ttl=60)
        assert driver.idem_insert(ex, scope="two", key="k", args_hash="h", job_id=b.id, ttl=60)
        one, two = driver.idem_get(ex, "one", "k"), driver.idem_get(ex, "two", "k")
    assert one is not None and two is not None
    assert (one["job_id"], two["job_id"]) == (a.id, b.id)


def test_idem_delete_frees_only_that_key(driver: Driver, new_job: JobFactory) -> None:
    job = insert(driver, new_job())
    with driver.transaction() as ex:
        for key in ("a", "b"):
            driver.idem_insert(ex, scope="s", key=key, args_hash="h", job_id=job.id, ttl=60)
    with driver.transaction() as ex:
        driver.idem_delete(ex, "s", "a")
        driver.idem_delete(ex, "s", "never-there")
    with driver.transaction() as ex:
        assert driver.idem_get(ex, "s", "a") is None
        assert driver.idem_get(ex, "s", "b") is not None


# ---- the codec for a just-inserted job -----------------------------------------------


def test_job_from_new_builds_the_job_an_insert_became(driver: Driver, new_job: JobFactory) -> None:
    new = new_job("resize", {"w": 10}, queue="img", priority=2, max_attempts=3, created_by="c")
    run_at = datetime(2030, 1, 1, tzinfo=UTC)
    created = run_at - timedelta(seconds=5)
    policies: dict[str, dict[str, object]] = {}
    job = driver.job_from_new(new, 41, run_at, created, policies)
    again = driver.job_from_new(new, 42, run_at, created, policies)
    assert (job.id, job.queue, job.task, job.args) == (41, "img", "resize", {"w": 10})
    assert (job.state, job.attempt, job.claim_version, job.priority) == ("queued", 0, 0, 2)
    assert (job.run_at, job.created_at, job.updated_at) == (run_at, created, created)
    assert (job.max_attempts, job.created_by) == (3, "c")
    assert job.retry_policy == json.loads(new.retry_policy_json) == again.retry_policy
    assert list(policies) == [new.retry_policy_json]  # decoded once per batch
    job.retry_policy["mutated"] = True
    assert "mutated" not in again.retry_policy  # each job has its own copy


@pytest.mark.parametrize("scheduled", [False, True], ids=["now", "scheduled"])
def test_job_insert_many_ids_answers_the_new_ids_in_request_order(
    driver: Driver, new_job: JobFactory, scheduled: bool
) -> None:
    delay = 60.0 if scheduled else None  # PostgreSQL: the multi-row INSERT, else COPY
    news = [new_job(f"task{i}", {"i": i}, delay=delay) for i in range(5)]
    with driver.transaction() as ex:
        ids = driver.job_insert_many_ids(ex, news)
    assert ids == sorted(set(ids)) and len(ids) == 5
    stored = [get(driver, job_id) for job_id in ids]
    assert [(j.task, j.args) for j in stored] == [(f"task{i}", {"i": i}) for i in range(5)]


def test_job_insert_without_notify_stores_the_job_and_sends_no_wake_up(
    driver: Driver, new_job: JobFactory
) -> None:
    listener = driver.listen() if driver.capabilities.listen_notify else None
    try:
        with driver.autocommit() as ex:
            quiet = driver.job_insert(ex, new_job("t", {"n": 1}, queue="quiet"), notify=False)
        with driver.autocommit() as ex:
            loud = driver.job_insert(ex, new_job("t", {"n": 2}, queue="loud"))
        with driver.read() as ex:
            assert driver.job_get(ex, quiet.id) == quiet
            assert driver.job_get(ex, loud.id) == loud
        if listener is not None:  # PostgreSQL: only the notifying insert woke the listener
            heard: list[str] = []
            for payload in listener.notifications(timeout=2.0):
                heard.append(payload)
                if payload == "loud":
                    break
            assert heard == ["loud"]
    finally:
        if listener is not None:
            listener.close()
