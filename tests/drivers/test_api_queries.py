"""The HTTP service's queries: API keys, readiness, wake-ups and scrape-time metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from durq import states
from durq._drivers import ApiKey, AttemptBucket, Driver, open_driver
from durq._drivers.sqlite.driver import path_from_url
from durq.errors import DatabaseUnavailable

from .helpers import JobFactory, PlainSql, ago, claim, claim_one, finish, insert, near


def _key(driver: Driver, key_id: str, *, owner: str = "ops", role: str = "admin") -> ApiKey:
    with driver.transaction() as ex:
        return driver.key_insert(ex, key_id=key_id, owner=owner, role=role, key_hash=f"h-{key_id}")


def test_key_insert_returns_the_new_key(driver: Driver, sql: PlainSql) -> None:
    key = _key(driver, "k1", owner="alice", role="reader")
    assert (key.id, key.owner, key.role, key.disabled) == ("k1", "alice", "reader", False)
    assert near(key.created_at, ago(0)) and key.last_used_at is key.disabled_at is None
    assert sql.scalar("SELECT key_hash FROM durq_api_keys WHERE id = 'k1'") == "h-k1"


def test_key_insert_refuses_a_second_key_with_the_same_hash(driver: Driver, sql: PlainSql) -> None:
    _key(driver, "k1")
    with pytest.raises(Exception) as caught, driver.transaction() as ex:
        driver.key_insert(ex, key_id="k2", owner="o", role="r", key_hash="h-k1")
    assert not driver.is_transient(caught.value)  # the same request fails again
    assert sql.scalar("SELECT count(*) FROM durq_api_keys") == 1


def test_key_bootstrap_creates_a_key(driver: Driver) -> None:
    with driver.transaction() as ex:
        key = driver.key_bootstrap(ex, key_id="dev", owner="me", role="admin", key_hash="hx")
        assert driver.key_get(ex, "dev") == key
    assert (key.id, key.owner, key.role, key.disabled) == ("dev", "me", "admin", False)


def test_key_bootstrap_reenables_the_key_with_that_hash(driver: Driver) -> None:
    with driver.transaction() as ex:
        first = driver.key_bootstrap(ex, key_id="dev", owner="me", role="admin", key_hash="hx")
        driver.key_disable(ex, "dev")
        again = driver.key_bootstrap(ex, key_id="dev-2", owner="you", role="reader", key_hash="hx")
        listed = driver.key_list(ex, after_id=None, limit=10)
    assert (again.id, again.owner, again.role, again.disabled) == ("dev", "you", "reader", False)
    assert again.created_at == first.created_at
    assert listed == [again]  # never a duplicate


def test_key_by_hash_finds_the_key_and_its_stored_hash(driver: Driver) -> None:
    key = _key(driver, "k1")
    with driver.read() as ex:
        assert driver.key_by_hash(ex, "h-k1") == (key, "h-k1")
        assert driver.key_by_hash(ex, "h-unknown") is None


def test_key_touch_records_the_last_use(driver: Driver) -> None:
    _key(driver, "k1")
    _key(driver, "k2")
    with driver.transaction() as ex:
        driver.key_touch(ex, "k1")
        driver.key_touch(ex, "missing")  # nothing to do, no error
        used, unused = driver.key_get(ex, "k1"), driver.key_get(ex, "k2")
    assert used is not None and near(used.last_used_at, ago(0))
    assert unused is not None and unused.last_used_at is None


def test_key_get_returns_the_key_or_none(driver: Driver) -> None:
    key = _key(driver, "k1")
    with driver.read() as ex:
        assert driver.key_get(ex, "k1") == key
        assert driver.key_get(ex, "k9") is None


def test_key_list_pages_in_id_order(driver: Driver) -> None:
    keys = {key_id: _key(driver, key_id) for key_id in ("b", "d", "a", "c")}
    with driver.read() as ex:
        assert [k.id for k in driver.key_list(ex, after_id=None, limit=10)] == list("abcd")
        assert [k.id for k in driver.key_list(ex, after_id="b", limit=10)] == ["c", "d"]
        assert driver.key_list(ex, after_id=None, limit=2) == [keys["a"], keys["b"]]
        assert driver.key_list(ex, after_id="d", limit=10) == []


def test_key_disable_disables_once(driver: Driver) -> None:
    _key(driver, "k1")
    with driver.transaction() as ex:
        first = driver.key_disable(ex, "k1")
    with driver.transaction() as ex:
        second = driver.key_disable(ex, "k1")  # keeps the first disabled_at
        assert driver.key_disable(ex, "nope") is None
        stored = driver.key_get(ex, "k1")
    assert first is not None and first.disabled and near(first.disabled_at, ago(0))
    assert second == first == stored


def test_ping_answers_on_a_live_connection_only(driver: Driver, db_url: str) -> None:
    with driver.read() as ex:
        driver.ping(ex)
    if db_url.startswith("sqlite:"):
        gone = open_driver(f"sqlite:///{Path(path_from_url(db_url)).parent}/missing/durq.db")
    else:
        gone = open_driver(db_url.rsplit("/", 1)[0] + "/durq_no_such_database")
    try:
        with pytest.raises(DatabaseUnavailable), gone.read() as ex:
            gone.ping(ex)
    finally:
        gone.close()


def test_notify_queue_wakes_listeners_at_commit(driver: Driver) -> None:
    if not driver.capabilities.listen_notify:
        with driver.transaction() as ex:  # workers poll: a no-op that still runs
            driver.notify_queue(ex, "mail")
        return
    listener = driver.listen()
    try:
        with pytest.raises(RuntimeError), driver.transaction() as ex:
            driver.notify_queue(ex, "rolled-back")
            raise RuntimeError("abort")
        with driver.transaction() as ex:
            driver.notify_queue(ex, "mail")
        # Notifications arrive in commit order: the rolled-back one never went out.
        assert next(iter(listener.notifications(timeout=10))) == "mail"
    finally:
        listener.close()


def test_job_counts_counts_by_queue_task_and_state(driver: Driver, new_job: JobFactory) -> None:
    for queue, task in (("a", "x"), ("a", "x"), ("a", "y"), ("b", "x")):
        insert(driver, new_job(task, queue=queue))
    (job,) = claim(driver, queue="b")
    finish(driver, job, states.complete())
    with driver.read() as ex:
        counts = sorted(driver.job_counts(ex))
    assert counts == [("a", "x", "queued", 2), ("a", "y", "queued", 1), ("b", "x", "succeeded", 1)]


def test_attempt_buckets_bins_stored_attempts_by_runtime(
    driver: Driver, new_job: JobFactory
) -> None:
    runtimes = [3, 5, 7, 30_000, 4_000_000, None]
    for _ in runtimes:
        insert(driver, new_job("t", queue="q", max_attempts=3))
    jobs = claim(driver, queue="q", limit=len(runtimes))
    for job, runtime in zip(jobs, runtimes, strict=True):
        finish(driver, job, states.retry(0, "E", "m"), runtime_ms=runtime)
    again = claim(driver, queue="q", limit=1)  # a second attempt: a retry
    finish(driver, again[0], states.complete(), runtime_ms=4)
    with driver.read() as ex:
        buckets = driver.attempt_buckets(ex)

    def key(b: AttemptBucket) -> tuple[str, int]:
        return (b.outcome, -1 if b.bucket is None else b.bucket)

    assert sorted(buckets, key=key) == [
        AttemptBucket("q", "t", "failed", None, 1, 0, 0),
        AttemptBucket("q", "t", "failed", 0, 2, 8, 0),  # <= 5 ms
        AttemptBucket("q", "t", "failed", 1, 1, 7, 0),  # <= 10 ms
        AttemptBucket("q", "t", "failed", 11, 1, 30_000, 0),  # <= 30 s
        AttemptBucket("q", "t", "failed", 16, 1, 4_000_000, 0),  # over an hour
        AttemptBucket("q", "t", "succeeded", 0, 1, 4, 1),
    ]


def test_job_arg_counts_groups_one_tasks_jobs_by_state_and_argument(
    driver: Driver, new_job: JobFactory
) -> None:
    insert(driver, new_job("sync", {"connector_id": "c1"}, queue="r", max_attempts=3))
    first = claim_one(driver, queue="r")
    finish(driver, first, states.retry(0, "E", "m"))
    finish(driver, claim_one(driver, queue="r"), states.complete())
    for conn in ("c1", "c2"):
        insert(driver, new_job("sync", {"connector_id": conn}, queue="q"))
    insert(driver, new_job("sync", {}, queue="q"))
    insert(driver, new_job("other", {"connector_id": "c1"}, queue="q"))
    with driver.read() as ex:
        by_arg = driver.job_arg_counts(ex, "sync", "connector_id")
        no_arg = driver.job_arg_counts(ex, "sync", "")
    assert sorted((r.state, r.label or "-", r.count, r.retries) for r in by_arg) == [
        ("queued", "-", 1, 0),
        ("queued", "c1", 1, 0),
        ("queued", "c2", 1, 0),
        ("succeeded", "c1", 1, 1),
    ]
    assert sorted((r.state, r.label, r.count, r.retries) for r in no_arg) == [
        ("queued", None, 3, 0),
        ("succeeded", None, 1, 1),
    ]
