"""The dashboard's queries: live counts, the minute rollup, dead-letter groups."""

from __future__ import annotations

import time

from durq import states
from durq._drivers import Driver
from durq._drivers.insights import MinuteStats

from .helpers import JobFactory, PlainSql, claim, finish, insert


def _dead(driver: Driver, new_job: JobFactory, task: str, code: str, n: int) -> list[int]:
    ids = [insert(driver, new_job(task=task)).id for _ in range(n)]
    for job in claim(driver, limit=n):
        finish(driver, job, states.dead_letter(code, "broken"))
    return ids


def test_queue_live_counts_counts_only_waiting_and_running_jobs(
    driver: Driver, new_job: JobFactory
) -> None:
    for queue in ("a", "a", "a", "b"):
        insert(driver, new_job(queue=queue))
    _running, done = claim(driver, queue="a", limit=2)
    finish(driver, done, states.complete())
    with driver.read() as ex:
        counts = driver.queue_live_counts(ex)
    assert sorted(counts) == [("a", "queued", 1), ("a", "running", 1), ("b", "queued", 1)]


def test_stats_rollup_counts_per_minute_and_queue_in_the_database(
    driver: Driver, new_job: JobFactory
) -> None:
    before = time.time() - 1
    insert(driver, new_job(queue="q"))
    insert(driver, new_job(queue="q"))
    ok, retried = claim(driver, queue="q", limit=2)
    finish(driver, ok, states.complete())
    finish(driver, retried, states.retry(60, "E", "again"))
    with driver.read() as ex:
        (row,) = driver.stats_rollup(ex, before)
        assert driver.stats_rollup(ex, time.time() + 60) == []
    assert (row.queue, row.succeeded, row.failed, row.dead_letter) == ("q", 1, 1, 0)
    assert row.minute % 60 == 0 and abs(row.minute - time.time()) < 120
    # Only the succeeded job still has the run_at it was claimed at: its pickup is known.
    assert row.pickup_p50_ms is not None and 0 <= row.pickup_p50_ms < 5000
    assert row.pickup_p95_ms == row.pickup_p50_ms


def test_stats_rollup_takes_nearest_rank_percentiles(driver: Driver, sql: PlainSql) -> None:
    minute = int(time.time() // 60) * 60 - 120  # a whole minute, two minutes ago
    pg = sql.engine.dialect.name == "postgresql"

    def ts(seconds: float) -> str:  # a literal time, in each dialect's storage
        return f"to_timestamp({seconds})" if pg else str(seconds)

    for n in range(1, 101):  # pickups of 1..100 ms, one job each
        job_id = sql.scalar(
            "INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, run_at, "
            f"created_at, updated_at, finished_at) VALUES ('q', 't', '{{}}', 'succeeded', 1, 1, "
            f"{ts(minute)}, {ts(minute)}, {ts(minute)}, {ts(minute + 1)}) RETURNING id"
        )
        sql.rows(
            "INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at, "
            f"finished_at, runtime_ms, outcome) VALUES (:id, 1, 1, 'w', {ts(minute + n / 1000)}, "
            f"{ts(minute + 1)}, 0, 'succeeded')",
            id=job_id,
        )
    with driver.read() as ex:
        (row,) = driver.stats_rollup(ex, float(minute))
    assert (row.minute, row.succeeded, row.failed) == (minute, 100, 0)
    assert (row.pickup_p50_ms, row.pickup_p95_ms) == (50, 95)  # ranks ceil(0.5n), ceil(0.95n)


def test_stats_minute_upsert_replaces_the_row_of_a_minute(driver: Driver, sql: PlainSql) -> None:
    first = MinuteStats(600, "q", 1, 0, 0, 10, 20)
    again = MinuteStats(600, "q", 5, 2, 1, 30, 90)
    with driver.transaction() as ex:
        driver.stats_minute_upsert(ex, [first, MinuteStats(600, "r", 1, 0, 0, None, None)])
        driver.stats_minute_upsert(ex, [again])
    with driver.read() as ex:
        assert driver.stats_minutes_since(ex, 0) == [
            again,
            MinuteStats(600, "r", 1, 0, 0, None, None),
        ]
    assert sql.scalar("SELECT count(*) FROM durq_stats_minutes") == 2


def test_stats_minutes_since_returns_rows_from_that_minute_in_order(driver: Driver) -> None:
    rows = [MinuteStats(m, "q", m // 60, 0, 0, None, None) for m in (120, 60, 180)]
    with driver.transaction() as ex:
        driver.stats_minute_upsert(ex, rows)
    with driver.read() as ex:
        assert [m.minute for m in driver.stats_minutes_since(ex, 120)] == [120, 180]


def test_stats_minutes_prune_deletes_rows_before_a_minute(driver: Driver) -> None:
    with driver.transaction() as ex:
        driver.stats_minute_upsert(
            ex, [MinuteStats(m, "q", 1, 0, 0, None, None) for m in (60, 120)]
        )
        driver.stats_minutes_prune(ex, 120)
    with driver.read() as ex:
        assert [m.minute for m in driver.stats_minutes_since(ex, 0)] == [120]


def test_dead_letter_groups_groups_by_task_and_error_code(
    driver: Driver, new_job: JobFactory
) -> None:
    _dead(driver, new_job, "mail", "E_SMTP", 3)
    _dead(driver, new_job, "mail", "E_DNS", 1)
    insert(driver, new_job(task="mail"))  # queued: not a dead letter
    with driver.read() as ex:
        groups = driver.dead_letter_groups(ex, created_by=None, limit=10)
        none_for_bob = driver.dead_letter_groups(ex, created_by="bob", limit=10)
    assert [(g.task, g.error_code, g.count) for g in groups] == [
        ("mail", "E_SMTP", 3),
        ("mail", "E_DNS", 1),
    ]
    assert groups[0].latest_at is not None and none_for_bob == []


def test_dead_letter_ids_lists_one_group_newest_first(driver: Driver, new_job: JobFactory) -> None:
    smtp = _dead(driver, new_job, "mail", "E_SMTP", 2)
    _dead(driver, new_job, "mail", "E_DNS", 1)
    with driver.read() as ex:
        ids = driver.dead_letter_ids(ex, task="mail", error_code="E_SMTP", created_by=None, limit=9)
        capped = driver.dead_letter_ids(
            ex, task="mail", error_code="E_SMTP", created_by=None, limit=1
        )
    assert ids == sorted(smtp, reverse=True) and capped == [max(smtp)]
