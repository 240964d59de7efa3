"""Keyed jobs: circuit breaker rows, per-key limit rows, alerts, run logs and the
guardrail window a queue row keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from durq import states
from durq._drivers import Driver
from durq._drivers.postgres.driver import conninfo_from_url

from .helpers import JobFactory, PlainSql, claim_one, finish, get, insert, near


def enter(driver: Driver, key: str, threshold: int = 5, pause: float = 1800.0) -> None:
    with driver.transaction() as ex:
        driver.breaker_enter(ex, key, threshold, pause)


# ---- breakers ----------------------------------------------------------------------------


def test_breaker_enter_creates_a_closed_row_then_updates_its_rule(
    driver: Driver, sql: PlainSql
) -> None:
    with driver.transaction() as ex:
        first = driver.breaker_enter(ex, "c1:p1", 5, 1800.0)
    assert (first.key, first.state, first.consecutive_failures) == ("c1:p1", "closed", 0)
    assert (first.threshold, first.pause_seconds, first.opened_count) == (5, 1800.0, 0)
    with driver.transaction() as ex:
        second = driver.breaker_enter(ex, "c1:p1", 3, 60.0)
    assert (second.threshold, second.pause_seconds) == (3, 60.0)
    assert sql.scalar("SELECT count(*) FROM durq_breakers") == 1


def test_breaker_lock_reads_the_row_or_none(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.breaker_lock(ex, "nope") is None
    enter(driver, "k", threshold=2)
    with driver.transaction() as ex:
        found = driver.breaker_lock(ex, "k")
    assert found is not None and (found.key, found.threshold) == ("k", 2)
    assert near(found.now, datetime.now(UTC))


def test_breaker_lock_many_locks_the_existing_rows_by_key(driver: Driver, db_url: str) -> None:
    for key, threshold in (("b", 2), ("a", 3)):
        enter(driver, key, threshold=threshold)
    with driver.transaction() as ex:
        assert driver.breaker_lock_many(ex, []) == {}
        found = driver.breaker_lock_many(ex, ["b", "nope", "a"])
        assert list(found) == ["a", "b"]  # key order: the order every finisher locks in
        assert (found["a"].threshold, found["b"].threshold) == (3, 2)
        if db_url.startswith("postgresql"):  # another session cannot take them meanwhile
            with psycopg.connect(conninfo_from_url(db_url), autocommit=True) as other:
                other.execute("SET lock_timeout = '100ms'")
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    other.execute("SELECT 1 FROM durq_breakers WHERE key = 'a' FOR UPDATE")


def test_breaker_read_many_reads_without_a_transaction(driver: Driver) -> None:
    enter(driver, "a")
    with driver.read() as ex:
        found = driver.breaker_read_many(ex, ["a", "missing"])
        assert driver.breaker_read_many(ex, []) == {}
    assert list(found) == ["a"] and found["a"].state == "closed"
    assert near(found["a"].now, datetime.now(UTC))


def test_breaker_set_counts_failures_opens_and_closes(driver: Driver) -> None:
    enter(driver, "k")
    until = datetime.now(UTC) + timedelta(minutes=30)
    with driver.transaction() as ex:
        failed = driver.breaker_set(
            ex, "k", failures=5, failed=True, paused_until=until, held_until=until, opened=True
        )
    assert failed is not None
    assert (failed.consecutive_failures, failed.opened_count, failed.state) == (5, 1, "open")
    assert near(failed.last_failure_at, datetime.now(UTC))
    assert near(failed.paused_until, until, timedelta(milliseconds=1))
    with driver.transaction() as ex:
        closed = driver.breaker_set(
            ex, "k", failures=0, failed=False, paused_until=None, held_until=None, opened=False
        )
    assert closed is not None
    assert (closed.consecutive_failures, closed.opened_count, closed.state) == (0, 1, "closed")
    assert closed.last_failure_at == failed.last_failure_at  # a success keeps the last failure
    with driver.transaction() as ex:
        assert (
            driver.breaker_set(
                ex,
                "none",
                failures=1,
                failed=True,
                paused_until=None,
                held_until=None,
                opened=False,
            )
            is None
        )


def test_breaker_set_with_a_past_pause_is_half_open(driver: Driver) -> None:
    enter(driver, "k")
    past = datetime.now(UTC) - timedelta(seconds=5)
    with driver.transaction() as ex:
        b = driver.breaker_set(
            ex, "k", failures=5, failed=True, paused_until=past, held_until=past, opened=True
        )
    assert b is not None and b.state == "half_open"


def test_breaker_list_orders_open_first_and_filters_failing(driver: Driver) -> None:
    for key in ("a", "b", "c"):
        enter(driver, key)
    until = datetime.now(UTC) + timedelta(minutes=5)
    with driver.transaction() as ex:
        driver.breaker_set(
            ex, "c", failures=5, failed=True, paused_until=until, held_until=until, opened=True
        )
        driver.breaker_set(
            ex, "b", failures=2, failed=True, paused_until=None, held_until=None, opened=False
        )
    with driver.read() as ex:
        every = driver.breaker_list(ex, failing_only=False, limit=10)
        failing = driver.breaker_list(ex, failing_only=True, limit=10)
        one = driver.breaker_list(ex, failing_only=False, limit=1)
    assert [b.key for b in every] == ["c", "a", "b"]
    assert [b.key for b in failing] == ["c", "b"]
    assert [b.key for b in one] == ["c"]


def test_breaker_totals_counts_paused_keys_and_openings(driver: Driver) -> None:
    with driver.read() as ex:
        assert driver.breaker_totals(ex) == (0, 0)
    for key in ("a", "b"):
        enter(driver, key)
    until = datetime.now(UTC) + timedelta(minutes=5)
    with driver.transaction() as ex:
        for _ in range(2):
            driver.breaker_set(
                ex,
                "a",
                failures=5,
                failed=True,
                paused_until=until,
                held_until=until,
                opened=True,
            )
    with driver.read() as ex:
        assert driver.breaker_totals(ex) == (1, 2)


def test_breaker_from_row_reads_a_stored_row(driver: Driver, sql: PlainSql) -> None:
    enter(driver, "k", threshold=7, pause=90.0)
    row = sql.one("SELECT *, updated_at AS now FROM durq_breakers WHERE key = 'k'")
    b = driver.breaker_from_row(row)
    assert (b.key, b.threshold, b.pause_seconds, b.state) == ("k", 7, 90.0, "closed")
    assert b.to_dict()["state"] == "closed"


def test_job_park_holds_the_keys_waiting_jobs_with_one_probe_first(
    driver: Driver, new_job: JobFactory
) -> None:
    first, second, third = (insert(driver, new_job(breaker_key="k")) for _ in range(3))
    other = insert(driver, new_job(breaker_key="other"))
    now = datetime.now(UTC)
    probe_at, held_until = now + timedelta(minutes=30), now + timedelta(minutes=31)
    with driver.transaction() as ex:
        parked = driver.job_park(ex, "k", probe_at=probe_at, held_until=held_until)
    assert parked == 3
    slack = timedelta(milliseconds=1)
    assert near(get(driver, first.id).run_at, probe_at, slack)
    assert near(get(driver, second.id).run_at, held_until, slack)
    assert near(get(driver, third.id).run_at, held_until, slack)
    assert get(driver, other.id).run_at == other.run_at


def test_job_release_makes_parked_jobs_due_now(driver: Driver, new_job: JobFactory) -> None:
    parked = insert(driver, new_job(breaker_key="k"))
    later = insert(driver, new_job(breaker_key="k", delay=7200))  # due after the hold
    now = datetime.now(UTC)
    held_until = now + timedelta(minutes=31)
    with driver.transaction() as ex:
        driver.job_park(ex, "k", probe_at=held_until, held_until=held_until)
    with driver.transaction() as ex:
        released = driver.job_release(ex, "k", held_until)
    assert released == 1
    assert near(get(driver, parked.id).run_at, datetime.now(UTC))
    assert get(driver, later.id).run_at > held_until


# ---- limits --------------------------------------------------------------------------------


def test_limit_define_inserts_then_updates_the_keys_limits(driver: Driver) -> None:
    with driver.transaction() as ex:
        driver.limit_define(ex, "api", concurrency=2, rate=None, per=1.0)
        driver.limit_define(ex, "api", concurrency=3, rate=10, per=60.0)
        driver.limit_define(ex, "b", concurrency=None, rate=5, per=1.0)
    with driver.read() as ex:
        listed = driver.limit_list(ex, 10)
    assert [(s.key, s.concurrency, s.rate, s.per, s.running) for s in listed] == [
        ("api", 3, 10, 60.0, 0),
        ("b", None, 5, 1.0, 0),
    ]


def test_limit_take_and_limit_release_count_running_slots(driver: Driver) -> None:
    with driver.transaction() as ex:
        driver.limit_define(ex, "k", concurrency=5, rate=None, per=1.0)
        driver.limit_take(ex, "k")
        driver.limit_take(ex, "k")
    with driver.read() as ex:
        assert driver.limit_list(ex, 10)[0].running == 2
    with driver.transaction() as ex:
        driver.limit_release(ex, "k", 1)
    with driver.read() as ex:
        assert driver.limit_list(ex, 10)[0].running == 1


def test_limit_release_never_goes_below_zero(driver: Driver) -> None:
    with driver.transaction() as ex:
        driver.limit_define(ex, "k", concurrency=1, rate=None, per=1.0)
        driver.limit_release(ex, "k", 3)
    with driver.read() as ex:
        assert driver.limit_list(ex, 10)[0].running == 0


def test_limit_list_is_in_key_order_and_bounded(driver: Driver) -> None:
    with driver.transaction() as ex:
        for key in ("z", "a", "m"):
            driver.limit_define(ex, key, concurrency=1, rate=None, per=1.0)
    with driver.read() as ex:
        assert [s.key for s in driver.limit_list(ex, 2)] == ["a", "m"]


# ---- alerts --------------------------------------------------------------------------------


def raise_alert(driver: Driver, key: str = "k", category: str = "cat", **context: object) -> int:
    with driver.transaction() as ex:
        return driver.alert_raise(
            ex, category=category, severity="warning", key=key, context=context
        ).id


def test_alert_raise_opens_once_and_counts_repeats(driver: Driver, sql: PlainSql) -> None:
    with driver.transaction() as ex:
        first = driver.alert_raise(ex, category="c", severity="warning", key="k", context={"n": 1})
    with driver.transaction() as ex:
        again = driver.alert_raise(ex, category="c", severity="error", key="k", context={"n": 2})
    assert again.id == first.id
    assert (again.count, again.severity, again.context, again.open) == (2, "error", {"n": 2}, True)
    assert again.first_seen == first.first_seen and again.last_seen >= first.last_seen
    raise_alert(driver, key="other", category="c")
    assert sql.scalar("SELECT count(*) FROM durq_alerts") == 2


def test_alert_resolve_closes_the_open_alert_and_a_new_one_opens_after(driver: Driver) -> None:
    first = raise_alert(driver)
    with driver.transaction() as ex:
        resolved = driver.alert_resolve(ex, category="cat", key="k")
        assert driver.alert_resolve(ex, category="cat", key="k") is None
    assert resolved is not None and resolved.id == first and not resolved.open
    assert raise_alert(driver) != first


def test_alert_open_finds_only_an_unresolved_alert(driver: Driver) -> None:
    with driver.read() as ex:
        assert driver.alert_open(ex, category="cat", key="k") is None
    alert_id = raise_alert(driver)
    with driver.read() as ex:
        found = driver.alert_open(ex, category="cat", key="k")
    assert found is not None and found.id == alert_id
    with driver.transaction() as ex:
        driver.alert_resolve(ex, category="cat", key="k")
    with driver.read() as ex:
        assert driver.alert_open(ex, category="cat", key="k") is None


def test_alert_list_filters_by_state_newest_first(driver: Driver) -> None:
    old = raise_alert(driver, key="a")
    new = raise_alert(driver, key="b")
    with driver.transaction() as ex:
        driver.alert_resolve(ex, category="cat", key="a")
    with driver.read() as ex:
        every = [a.id for a in driver.alert_list(ex, state="all", limit=10)]
        opened = [a.id for a in driver.alert_list(ex, state="open", limit=10)]
        resolved = [a.id for a in driver.alert_list(ex, state="resolved", limit=10)]
        one = [a.id for a in driver.alert_list(ex, state="all", limit=1)]
    assert (every, opened, resolved, one) == ([new, old], [new], [old], [new])


def test_alert_ack_stamps_once_and_misses_unknown_ids(driver: Driver) -> None:
    alert_id = raise_alert(driver)
    with driver.transaction() as ex:
        acked = driver.alert_ack(ex, alert_id)
    with driver.transaction() as ex:
        again = driver.alert_ack(ex, alert_id)
        assert driver.alert_ack(ex, alert_id + 1000) is None
    assert acked is not None and acked.acked_at is not None
    assert again is not None and again.acked_at == acked.acked_at


def test_alert_from_row_reads_a_stored_row(driver: Driver, sql: PlainSql) -> None:
    raise_alert(driver, secret_free="yes")
    alert = driver.alert_from_row(sql.one("SELECT * FROM durq_alerts"))
    assert (alert.category, alert.key, alert.context, alert.count) == (
        "cat",
        "k",
        {"secret_free": "yes"},
        1,
    )
    assert alert.to_dict()["state"] == "open"


# ---- run logs, guardrail windows -----------------------------------------------------------


def test_attempt_report_stores_the_run_log_with_its_attempt(
    driver: Driver, new_job: JobFactory
) -> None:
    insert(driver, new_job())
    job = claim_one(driver)
    finish(driver, job, states.complete())
    with driver.transaction() as ex:
        driver.attempt_report(
            ex, job_id=job.id, claim_version=job.claim_version, report=(12, 3, "3 bad rows")
        )
        driver.attempt_report(
            ex, job_id=job.id, claim_version=job.claim_version + 1, report=(1, 1, "no such")
        )
    with driver.read() as ex:
        (attempt,) = driver.attempt_list(ex, job.id)
    assert (attempt.processed, attempt.failed, attempt.summary) == (12, 3, "3 bad rows")


def test_queue_mark_degraded_keeps_the_first_time(driver: Driver, sql: PlainSql) -> None:
    with driver.transaction() as ex:
        assert driver.queue_mark_degraded(ex, "q") == 0.0
    sql.rows(
        "UPDATE durq_queues SET degraded_since = :when WHERE name = 'q'",
        when=driver.ts_param(datetime.now(UTC) - timedelta(seconds=600)),
    )
    with driver.transaction() as ex:
        seconds = driver.queue_mark_degraded(ex, "q")
    assert 599 <= seconds <= 610


def test_queue_clear_degraded_says_whether_it_was_degraded(driver: Driver) -> None:
    with driver.transaction() as ex:
        assert driver.queue_clear_degraded(ex, "q") is False
        driver.queue_mark_degraded(ex, "q")
    with driver.transaction() as ex:
        assert driver.queue_clear_degraded(ex, "q") is True
        assert driver.queue_clear_degraded(ex, "q") is False
