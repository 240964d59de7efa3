"""Claims awaited on an event loop (``capabilities.async_claims``): the same statement as
``job_claim`` on a connection of their own, so the same jobs, rows and exclusivity."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from durq._drivers import Driver, open_driver
from durq.errors import DatabaseUnavailable
from durq.types import Job, JobState

from .helpers import JobFactory, ago, claim, get, insert


def _loop_claims(driver: Driver, *, limit: int, rounds: int = 1) -> list[list[int]]:
    """``rounds`` event-loop claims of up to ``limit`` jobs each: the ids of each."""

    async def main() -> list[list[int]]:
        claims = await driver.async_claims()
        try:
            out = []
            for _ in range(rounds):
                jobs = await claims.job_claim(
                    queue="default", worker_id="loop", limit=limit, lease_seconds=30
                )
                out.append([job.id for job in jobs])
            return out
        finally:
            await claims.close()

    return asyncio.run(main())


@pytest.fixture
def loop_driver(driver: Driver) -> Driver:
    if not driver.capabilities.async_claims:
        pytest.skip(f"{driver.dialect} claims in a thread (no async_claims)")
    return driver


def test_async_claims_return_the_jobs_as_stored_in_claim_order(
    loop_driver: Driver, new_job: JobFactory
) -> None:
    driver = loop_driver
    low = insert(driver, new_job("t", {"n": 1}, priority=5, run_at=ago(30)))
    high_new = insert(driver, new_job("t", {"n": 2}, priority=1, run_at=ago(10)))
    high_old = insert(driver, new_job("t", {"n": 3}, priority=1, run_at=ago(20)))
    not_yet = insert(driver, new_job("t", {"n": 4}, delay=60))

    async def main() -> list[Job]:
        claims = await driver.async_claims()
        try:
            return await claims.job_claim(
                queue="default", worker_id="w-loop", limit=10, lease_seconds=45
            )
        finally:
            await claims.close()

    jobs = asyncio.run(main())
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


def test_async_claims_and_threaded_claims_never_share_a_job(
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

    def on_loop() -> None:
        start.wait()
        for ids in _loop_claims(driver, limit=9, rounds=total):
            with lock:
                taken.extend(ids)

    threads = [threading.Thread(target=f) for f in (threaded, threaded, on_loop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(taken) == total and len(set(taken)) == total


def test_async_claims_absent_from_a_dialect_say_to_claim_in_a_thread(driver: Driver) -> None:
    if driver.capabilities.async_claims:
        pytest.skip(f"{driver.dialect} has event-loop claims")
    with pytest.raises(NotImplementedError, match="claim in a thread"):
        asyncio.run(driver.async_claims())


def test_async_claims_report_an_unreachable_database_without_its_password() -> None:
    driver = open_driver("postgresql://durq:s3cret-pw@127.0.0.1:1/nowhere")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            asyncio.run(driver.async_claims())
    finally:
        driver.close()
    message = str(caught.value)
    assert "cannot connect" in message and "DURQ_DATABASE_URL" in message
    assert "s3cret-pw" not in message
