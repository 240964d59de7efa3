"""Queues: the pause flag, counts by state, and the age of the ready backlog."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durq import states
from durq._drivers import Driver

from .helpers import JobFactory, PlainSql, claim, finish, insert


def test_queue_set_paused_creates_then_updates_the_queue_row(driver: Driver, sql: PlainSql) -> None:
    with driver.read() as ex:
        assert driver.queue_list(ex) == []
    with driver.transaction() as ex:
        driver.queue_set_paused(ex, "mail", True)
    with driver.read() as ex:
        assert driver.queue_list(ex) == [("mail", True)]
    with driver.transaction() as ex:
        driver.queue_set_paused(ex, "mail", False)
        driver.queue_set_paused(ex, "mail", False)  # idempotent
    with driver.read() as ex:
        assert driver.queue_list(ex) == [("mail", False)]
    assert sql.scalar("SELECT count(*) FROM durq_queues") == 1


def test_queue_list_names_every_queue_with_a_row_in_name_order(driver: Driver) -> None:
    with driver.transaction() as ex:
        for name, paused in (("zeta", True), ("alpha", False), ("mid", True)):
            driver.queue_set_paused(ex, name, paused)
    with driver.read() as ex:
        listed = driver.queue_list(ex)
    assert listed == [("alpha", False), ("mid", True), ("zeta", True)]
    assert all(isinstance(paused, bool) for _, paused in listed)


def test_queue_counts_counts_jobs_by_queue_and_state(driver: Driver, new_job: JobFactory) -> None:
    for queue in ("a", "a", "a", "b"):
        insert(driver, new_job(queue=queue))
    running, done = claim(driver, queue="a", limit=2)
    finish(driver, done, states.complete())
    with driver.read() as ex:
        counts = driver.queue_counts(ex)
    assert sorted(counts) == [
        ("a", "queued", 1),
        ("a", "running", 1),
        ("a", "succeeded", 1),
        ("b", "queued", 1),
    ]
    assert running.queue == "a"


def test_queue_counts_of_an_empty_database_is_empty(driver: Driver) -> None:
    with driver.read() as ex:
        assert driver.queue_counts(ex) == []


def test_queue_ready_ages_measures_the_ready_backlog(driver: Driver, new_job: JobFactory) -> None:
    now = datetime.now(UTC)
    for age in range(1, 21):  # ready for 1..20 seconds
        insert(driver, new_job(queue="a", run_at=now - timedelta(seconds=age)))
    insert(driver, new_job(queue="b", run_at=now - timedelta(seconds=50)))
    insert(driver, new_job(queue="b", delay=60))  # not ready yet
    insert(driver, new_job(queue="c", run_at=now - timedelta(seconds=99)))
    claim(driver, queue="c")  # running: not ready
    with driver.read() as ex:
        ages = {queue: rest for queue, *rest in driver.queue_ready_ages(ex)}
    assert sorted(ages) == ["a", "b"]
    elapsed = (datetime.now(UTC) - now).total_seconds() + 0.1
    (ready_a, oldest_a, p95_a), (ready_b, oldest_b, p95_b) = ages["a"], ages["b"]
    assert (ready_a, ready_b) == (20, 1)
    assert 20 <= oldest_a <= 20 + elapsed
    assert 19 <= p95_a <= 19 + elapsed  # nearest rank: the 19th of 20 ages, on both backends
    assert 50 <= oldest_b <= 50 + elapsed and 50 <= p95_b <= 50 + elapsed


def test_queue_ready_ages_of_no_ready_job_is_empty(driver: Driver, new_job: JobFactory) -> None:
    insert(driver, new_job(delay=60))
    with driver.read() as ex:
        assert driver.queue_ready_ages(ex) == []


def test_queue_owner_counts_counts_only_that_owners_jobs(
    driver: Driver, new_job: JobFactory
) -> None:
    for queue, owner in (("a", "acme"), ("a", "acme"), ("a", "other"), ("b", "other")):
        insert(driver, new_job(queue=queue, created_by=owner))
    insert(driver, new_job(queue="a", created_by="acme", delay=3600))  # queued, not ready
    with driver.read() as ex:
        assert sorted(driver.queue_owner_counts(ex, "acme")) == [("a", "queued", 3, 2)]
        assert sorted(driver.queue_owner_counts(ex, "other")) == [
            ("a", "queued", 1, 1),
            ("b", "queued", 1, 1),
        ]
        assert driver.queue_owner_counts(ex, "nobody") == []
