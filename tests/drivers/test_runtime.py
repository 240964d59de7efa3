"""The worker runtime: the worker registry, leader leases, and pruning."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from durq import states
from durq._drivers import Driver
from durq.types import Artifact, JobState, WorkerInfo

from ..waiting import wait_until
from .helpers import JobFactory, PlainSql, ago, claim, finish, get, insert, near, set_time


def _register(
    driver: Driver,
    worker_id: str,
    *,
    hostname: str = "host-a",
    pid: int = 4321,
    queues: Sequence[str] = ("default", "mail"),
    concurrency: int = 8,
    heartbeat_seconds: float = 10.0,
) -> None:
    with driver.transaction() as ex:
        driver.worker_register(
            ex,
            worker_id=worker_id,
            hostname=hostname,
            pid=pid,
            queues=queues,
            concurrency=concurrency,
            heartbeat_seconds=heartbeat_seconds,
        )


def _workers(driver: Driver, *, include_stopped: bool = True, limit: int = 100) -> list[WorkerInfo]:
    with driver.read() as ex:
        return driver.worker_list(ex, include_stopped=include_stopped, limit=limit)


# ---- workers -------------------------------------------------------------------------


def test_worker_register_records_the_worker(driver: Driver) -> None:
    _register(driver, "w1")
    (w,) = _workers(driver)
    assert (w.id, w.hostname, w.pid, w.queues, w.concurrency) == (
        "w1",
        "host-a",
        4321,
        ["default", "mail"],
        8,
    )
    assert (w.heartbeat_seconds, w.processed, w.running, w.alive) == (10.0, 0, 0, True)
    assert w.stopped_at is None and w.started_at == w.heartbeat_at
    assert near(w.started_at, ago(0))


def test_worker_register_again_starts_the_worker_afresh(driver: Driver) -> None:
    _register(driver, "w1")
    with driver.transaction() as ex:
        driver.worker_stop(ex, "w1", 17)
    _register(driver, "w1", hostname="host-b", pid=99, queues=["x"], concurrency=2)
    (w,) = _workers(driver)
    assert (w.hostname, w.pid, w.queues, w.concurrency) == ("host-b", 99, ["x"], 2)
    assert (w.stopped_at, w.processed, w.alive) == (None, 0, True)


def test_worker_heartbeat_records_progress_and_time(driver: Driver, sql: PlainSql) -> None:
    _register(driver, "w1")
    _register(driver, "w2")
    set_time(sql, driver, "durq_workers", "heartbeat_at", ago(3600), where="id", key="w1")
    assert not next(w for w in _workers(driver) if w.id == "w1").alive
    with driver.transaction() as ex:
        driver.worker_heartbeat(ex, "w1", 42)
        driver.worker_heartbeat(ex, "nobody", 1)  # unknown: nothing to do
    w1, w2 = sorted(_workers(driver), key=lambda w: w.id)
    assert (w1.processed, w1.alive) == (42, True) and near(w1.heartbeat_at, ago(0))
    assert w2.processed == 0


def test_worker_stop_marks_the_worker_stopped(driver: Driver) -> None:
    _register(driver, "w1")
    _register(driver, "w2")
    with driver.transaction() as ex:
        driver.worker_stop(ex, "w1", 5)
    assert [w.id for w in _workers(driver, include_stopped=False)] == ["w2"]
    (stopped,) = [w for w in _workers(driver) if w.id == "w1"]
    assert (stopped.alive, stopped.processed) == (False, 5)
    assert stopped.stopped_at is not None and stopped.stopped_at == stopped.heartbeat_at


def test_worker_list_counts_running_jobs_newest_first(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    _register(driver, "old")
    _register(driver, "new")
    set_time(sql, driver, "durq_workers", "started_at", ago(60), where="id", key="old")
    for _ in range(3):
        insert(driver, new_job())
    with driver.transaction() as ex:
        driver.job_claim(ex, queue="default", worker_id="old", limit=2, lease_seconds=30)
    listed = _workers(driver)
    assert [(w.id, w.running) for w in listed] == [("new", 0), ("old", 2)]
    assert [w.id for w in _workers(driver, limit=1)] == ["new"]


def test_worker_list_says_a_silent_worker_is_not_alive(driver: Driver, sql: PlainSql) -> None:
    _register(driver, "quiet", heartbeat_seconds=5.0)
    _register(driver, "chatty", heartbeat_seconds=5.0)
    # Alive: heard from within three heartbeats and a second.
    set_time(sql, driver, "durq_workers", "heartbeat_at", ago(17), where="id", key="quiet")
    set_time(sql, driver, "durq_workers", "heartbeat_at", ago(14), where="id", key="chatty")
    alive = {w.id: w.alive for w in _workers(driver)}
    assert alive == {"quiet": False, "chatty": True}


def test_worker_prune_forgets_long_silent_workers(driver: Driver, sql: PlainSql) -> None:
    for worker in ("gone", "recent"):
        _register(driver, worker)
    set_time(sql, driver, "durq_workers", "heartbeat_at", ago(7200), where="id", key="gone")
    set_time(sql, driver, "durq_workers", "heartbeat_at", ago(600), where="id", key="recent")
    with driver.transaction() as ex:
        driver.worker_prune(ex, older_than=3600)
    assert [w.id for w in _workers(driver)] == ["recent"]


def test_worker_from_row_decodes_a_worker_row(driver: Driver, sql: PlainSql) -> None:
    _register(driver, "w1", pid=os.getpid())
    row = sql.one("SELECT * FROM durq_workers WHERE id = 'w1'")
    decoded = driver.worker_from_row({**row, "alive": 1, "running": 3})
    (listed,) = _workers(driver)
    assert decoded == dataclasses.replace(listed, running=3)
    assert (decoded.id, decoded.pid, decoded.queues, decoded.alive, decoded.running) == (
        "w1",
        os.getpid(),
        ["default", "mail"],
        True,
        3,
    )


# ---- leader leases -------------------------------------------------------------------


def test_leader_acquire_lets_one_holder_lead_until_expiry(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.leader_acquire(ex, "reaper", "a", 30) is True
        assert driver.leader_acquire(ex, "reaper", "b", 30) is False
        assert driver.leader_acquire(ex, "reaper", "a", 0.05) is True  # renewing
        assert driver.leader_acquire(ex, "other-role", "b", 30) is True
        assert driver.leader_get(ex, "reaper") == "a"

    def b_took_over() -> bool:
        with driver.transaction() as ex:
            return driver.leader_acquire(ex, "reaper", "b", 30)

    wait_until(b_took_over, timeout=10, what="the lapsed leader lease to pass to b")
    with driver.transaction() as ex:
        assert driver.leader_get(ex, "reaper") == "b"
        assert driver.leader_acquire(ex, "reaper", "a", 30) is False


def test_leader_release_frees_the_role_only_for_its_holder(driver: Driver) -> None:
    with driver.transaction() as ex:
        driver.leader_acquire(ex, "reaper", "a", 30)
        driver.leader_release(ex, "reaper", "b")  # not b's to release
        assert driver.leader_get(ex, "reaper") == "a"
        driver.leader_release(ex, "reaper", "a")
        assert driver.leader_get(ex, "reaper") is None
        assert driver.leader_acquire(ex, "reaper", "b", 30) is True


def test_leader_get_is_none_for_a_free_or_lapsed_role(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.leader_get(ex, "nobody-leads") is None
        driver.leader_acquire(ex, "brief", "a", 0.05)

    def lapsed() -> bool:
        with driver.read() as ex:
            return driver.leader_get(ex, "brief") is None

    wait_until(lapsed, timeout=10, what="the leader lease to lapse")


# ---- pruning -------------------------------------------------------------------------


def test_job_prune_deletes_old_finished_jobs_and_leaves_tombstones(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    for _ in range(4):
        insert(driver, new_job())
    waiting = insert(driver, new_job(queue="other"))
    old, young, dead, running = claim(driver, limit=4)
    finish(driver, old, states.complete(), artifacts=[Artifact("a", 1)])
    finish(driver, young, states.complete())
    finish(driver, dead, states.dead_letter("E", "m"))
    for job, seconds in ((old, 7200), (young, 60), (dead, 7200)):
        set_time(sql, driver, "durq_jobs", "finished_at", ago(seconds), where="id", key=job.id)
    with driver.transaction() as ex:
        assert driver.job_prune(ex, JobState.SUCCEEDED, older_than=3600, limit=100) == 1
    with driver.read() as ex:
        assert driver.job_get(ex, old.id) is None
        assert driver.tombstone_get(ex, old.id) is True
        assert driver.attempt_list(ex, old.id) == []
        assert driver.artifact_list(ex, old.id) == []
        for kept in (young, dead, running, waiting):
            assert driver.job_get(ex, kept.id) is not None
            assert driver.tombstone_get(ex, kept.id) is False
    assert sql.scalar("SELECT count(*) FROM durq_attempts WHERE job_id = :id", id=old.id) == 0
    with driver.transaction() as ex:
        assert driver.job_prune(ex, JobState.DEAD_LETTER, older_than=3600, limit=100) == 1
        assert driver.job_prune(ex, JobState.SUCCEEDED, older_than=3600, limit=100) == 0
    assert get(driver, young.id).state == JobState.SUCCEEDED


def test_job_prune_takes_the_oldest_first_up_to_the_limit(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    for _ in range(3):
        insert(driver, new_job())
    jobs = claim(driver, limit=3)
    for job, hours in zip(jobs, (1, 3, 2), strict=True):
        finish(driver, job, states.complete())
        set_time(sql, driver, "durq_jobs", "finished_at", ago(hours * 3600), where="id", key=job.id)
    with driver.transaction() as ex:
        assert driver.job_prune(ex, JobState.SUCCEEDED, older_than=60, limit=2) == 2
    with driver.read() as ex:
        left = [j.id for j in jobs if driver.job_get(ex, j.id) is not None]
        assert [driver.tombstone_get(ex, j.id) for j in jobs] == [False, True, True]
    assert left == [jobs[0].id]


def test_tombstone_prune_forgets_old_tombstones(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    for _ in range(3):
        insert(driver, new_job())
    jobs = claim(driver, limit=3)
    for job in jobs:
        finish(driver, job, states.complete())
        set_time(sql, driver, "durq_jobs", "finished_at", ago(7200), where="id", key=job.id)
    with driver.transaction() as ex:
        assert driver.job_prune(ex, JobState.SUCCEEDED, older_than=60, limit=10) == 3
    for job in jobs[:2]:
        set_time(sql, driver, "durq_tombstones", "pruned_at", ago(7200), where="job_id", key=job.id)
    with driver.transaction() as ex:
        driver.tombstone_prune(ex, older_than=3600, limit=1)
    assert sql.scalar("SELECT count(*) FROM durq_tombstones") == 2  # the limit held
    with driver.transaction() as ex:
        driver.tombstone_prune(ex, older_than=3600, limit=10)
    with driver.read() as ex:
        assert [driver.tombstone_get(ex, j.id) for j in jobs] == [False, False, True]


def test_idempotency_prune_deletes_expired_keys_only(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    job = insert(driver, new_job())
    with driver.transaction() as ex:
        for key in ("old1", "old2", "old3", "live"):
            driver.idem_insert(ex, scope="s", key=key, args_hash="h", job_id=job.id, ttl=3600)
    for key in ("old1", "old2", "old3"):
        set_time(sql, driver, "durq_idempotency", "expires_at", ago(1), where="key", key=key)
    with driver.transaction() as ex:
        driver.idempotency_prune(ex, limit=2)
    assert sql.scalar("SELECT count(*) FROM durq_idempotency") == 2  # the limit held
    with driver.transaction() as ex:
        driver.idempotency_prune(ex, limit=100)
    rows = sql.rows("SELECT key FROM durq_idempotency")
    assert [r["key"] for r in rows] == ["live"]
