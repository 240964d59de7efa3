"""A connection awaited on an event loop (``capabilities.loop_connections``): the worker's
claim and plain outcome writes, the same statements as ``job_claim`` and
``job_finish_many`` on a connection of their own, so the same jobs, rows and answers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from durq import states
from durq._drivers import Driver, LoopConnection, open_driver
from durq.errors import DatabaseUnavailable, LeaseLost
from durq.types import Artifact, Finished, Job, JobState

from .helpers import JobFactory, PlainSql, ago, claim, get, insert, request
from .test_jobs_lease import _comparable, _held, _outcome_changes
from .test_keys import enter

T = TypeVar("T")


def _on_loop(driver: Driver, use: Callable[[LoopConnection], Awaitable[T]]) -> T:
    """``use`` a fresh loop connection in an event loop of its own."""

    async def main() -> T:
        conn = await driver.loop_connection()
        try:
            return await use(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


def _claim_on_loop(driver: Driver, *, limit: int, worker: str = "loop", lease: float = 30) -> Any:
    return lambda conn: conn.job_claim(
        queue="default", worker_id=worker, limit=limit, lease_seconds=lease
    )


@pytest.fixture
def loop_driver(driver: Driver) -> Driver:
    if not driver.capabilities.loop_connections:
        pytest.skip(f"{driver.dialect} runs its statements in threads (no loop_connections)")
    return driver


def test_loop_connection_claims_the_jobs_as_stored_in_claim_order(
    loop_driver: Driver, new_job: JobFactory
) -> None:
    driver = loop_driver
    low = insert(driver, new_job("t", {"n": 1}, priority=5, run_at=ago(30)))
    high_new = insert(driver, new_job("t", {"n": 2}, priority=1, run_at=ago(10)))
    high_old = insert(driver, new_job("t", {"n": 3}, priority=1, run_at=ago(20)))
    not_yet = insert(driver, new_job("t", {"n": 4}, delay=60))
    jobs: list[Job] = _on_loop(driver, _claim_on_loop(driver, limit=10, worker="w-loop", lease=45))
    assert [j.id for j in jobs] == [high_old.id, high_new.id, low.id]
    for job in jobs:
        stored = get(driver, job.id)
        assert job == stored  # every field, timestamps in UTC included
        assert (stored.state, stored.worker_id, stored.attempt, stored.claim_version) == (
            JobState.RUNNING,
            "w-loop",
            1,
            1,
        )
        assert stored.lease_expires_at is not None and stored.heartbeat_at is not None
        assert stored.lease_expires_at - stored.heartbeat_at == timedelta(seconds=45)
    assert get(driver, not_yet.id).state == JobState.QUEUED


def test_loop_connection_and_threaded_claims_never_share_a_job(
    loop_driver: Driver, new_job: JobFactory
) -> None:
    driver = loop_driver
    total = 400
    for i in range(total):
        insert(driver, new_job("t", {"n": i}))
    taken: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(3)

    def threaded() -> None:
        start.wait()
        while batch := claim(driver, limit=7, worker="thread"):
            with lock:
                taken.extend(job.id for job in batch)

    async def claim_all(conn: LoopConnection) -> None:
        while batch := await conn.job_claim(
            queue="default", worker_id="loop", limit=9, lease_seconds=30
        ):
            with lock:
                taken.extend(job.id for job in batch)

    def on_loop() -> None:
        start.wait()
        _on_loop(driver, claim_all)

    threads = [threading.Thread(target=f) for f in (threaded, threaded, on_loop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(taken) == total and len(set(taken)) == total


def test_loop_connection_finishes_what_job_finish_many_finishes(
    loop_driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    driver = loop_driver
    changes = _outcome_changes()
    threaded = _held(driver, new_job, len(changes), queue="threaded", max_attempts=5)
    looped = _held(driver, new_job, len(changes), queue="looped", max_attempts=5)
    stale = _held(driver, new_job, 1, queue="stale")[0]

    def reqs(jobs: list[Job]) -> list[Any]:
        return [
            request(job, change, worker="wx", runtime_ms=9)
            for job, change in zip(jobs, changes, strict=True)
        ]

    with driver.transaction() as ex:
        by_thread = driver.job_finish_many(ex, reqs(threaded))
    lost_req = request(stale, states.complete(), version=stale.claim_version + 1)
    by_loop = _on_loop(driver, lambda conn: conn.job_finish_many([*reqs(looped), lost_req]))
    *written, lost = by_loop
    assert all(isinstance(o, Finished) for o in written)
    assert [(o.state, o.last_error_code) for o in written if isinstance(o, Finished)] == [
        (o.state, o.last_error_code) for o in by_thread if isinstance(o, Finished)
    ]
    assert isinstance(lost, LeaseLost) and lost.job_id == stale.id
    assert get(driver, stale.id) == stale
    assert [_comparable(get(driver, j.id)) for j in looped] == [
        _comparable(get(driver, j.id)) for j in threaded
    ]
    rows = sql.rows(
        "SELECT j.queue, a.outcome, a.error_code, a.runtime_ms, a.worker_id FROM durq_attempts a"
        " JOIN durq_jobs j ON j.id = a.job_id ORDER BY j.queue, a.job_id"
    )
    per_queue: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        per_queue.setdefault(r["queue"], []).append(
            (r["outcome"], r["error_code"], r["runtime_ms"], r["worker_id"])
        )
    assert per_queue["looped"] == per_queue["threaded"]


def test_loop_connection_reads_breakers_as_breaker_read_many(loop_driver: Driver) -> None:
    driver = loop_driver
    enter(driver, "calm")
    enter(driver, "tripped")
    with driver.transaction() as ex:
        driver.breaker_set(
            ex, "tripped", failures=2, failed=True, paused_until=None, held_until=None, opened=False
        )
    found = _on_loop(driver, lambda conn: conn.breaker_read_many(["tripped", "calm", "missing"]))
    with driver.read() as ex:
        expected = driver.breaker_read_many(ex, ["calm", "missing", "tripped"])
    assert sorted(found) == ["calm", "tripped"]
    for key in found:  # the same rows; ``now`` is each read's own clock
        assert replace(found[key], now=expected[key].now) == expected[key]
    assert found["tripped"].consecutive_failures == 2
    assert _on_loop(driver, lambda conn: conn.breaker_read_many([])) == {}


def test_loop_connection_leaves_artifacts_to_a_pooled_transaction(
    loop_driver: Driver, new_job: JobFactory
) -> None:
    (job,) = _held(loop_driver, new_job, 1)
    req = request(job, states.complete(), artifacts=[Artifact("file", {"n": 1}, ref="a.txt")])
    with pytest.raises(ValueError, match="pooled connection"):
        _on_loop(loop_driver, lambda conn: conn.job_finish_many([req]))
    assert get(loop_driver, job.id) == job


def test_loop_connection_absent_from_a_dialect_says_to_run_in_a_thread(driver: Driver) -> None:
    if driver.capabilities.loop_connections:
        pytest.skip(f"{driver.dialect} has event-loop connections")
    with pytest.raises(NotImplementedError, match="in a thread"):
        asyncio.run(driver.loop_connection())


def test_loop_connection_reports_an_unreachable_database_without_its_password() -> None:
    driver = open_driver("postgresql://durq:s3cret-pw@127.0.0.1:1/nowhere")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            asyncio.run(driver.loop_connection())
    finally:
        driver.close()
    message = str(caught.value)
    assert "cannot connect" in message and "DURQ_DATABASE_URL" in message
    assert "s3cret-pw" not in message
