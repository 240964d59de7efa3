"""A successful attempt is stored on its job row; every other outcome keeps its row in
durq_attempts. Every finish path follows the one rule (the single fenced write of the
reclaimer, ``App.run_job`` and HTTP sync mode, and the worker's batch), and every read of
attempts returns the succeeded attempt as the record it used to be stored as."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from durq import states
from durq._drivers import Driver
from durq.types import Attempt, Finished, Job

from .helpers import JobFactory, PlainSql, claim, get, insert, request

#: A finish path: one job_finish per request, or one job_finish_many for them all.
PATHS = ["job_finish", "job_finish_many"]
REQUEUEABLE = sorted(states.requeue())  # every state but running


def _finish_all(driver: Driver, path: str, done: list[tuple[Job, states.Change, int]]) -> None:
    # The finisher is the claimer, as fencing makes it in every real finish.
    reqs = [
        request(job, change, worker=job.worker_id or "", runtime_ms=ms) for job, change, ms in done
    ]
    with driver.transaction() as ex:
        if path == "job_finish":
            written: list[Any] = [driver.job_finish(ex, req) for req in reqs]
        else:
            written = driver.job_finish_many(ex, reqs)
    assert all(isinstance(w, Job | Finished) for w in written), written


def _stored(sql: PlainSql, job_id: int) -> list[tuple[int, str, int | None]]:
    rows = sql.rows(
        "SELECT claim_version, outcome, runtime_ms FROM durq_attempts WHERE job_id = :id "
        "ORDER BY claim_version",
        id=job_id,
    )
    return [(r["claim_version"], r["outcome"], r["runtime_ms"]) for r in rows]


@pytest.mark.parametrize("path", PATHS)
def test_a_success_stores_no_attempt_row_and_a_failure_keeps_its_row(
    driver: Driver, new_job: JobFactory, sql: PlainSql, path: str
) -> None:
    for _ in range(4):
        insert(driver, new_job(max_attempts=3))
    ok, failed, dead, snoozed = claim(driver, limit=4)
    _finish_all(
        driver,
        path,
        [
            (ok, states.complete({"n": 1}), 41),
            (failed, states.retry(0, "Boom", "it broke"), 42),
            (dead, states.dead_letter("Fatal", "no way"), 43),
            (snoozed, states.snooze(60), 44),
        ],
    )
    assert _stored(sql, ok.id) == []
    assert _stored(sql, failed.id) == [(1, "failed", 42)]
    assert _stored(sql, dead.id) == [(1, "failed", 43)]
    assert _stored(sql, snoozed.id) == [(1, "snoozed", 44)]
    row = sql.one("SELECT state, runtime_ms FROM durq_jobs WHERE id = :id", id=ok.id)
    assert (row["state"], row["runtime_ms"]) == ("succeeded", 41)


@pytest.mark.parametrize("path", PATHS)
def test_a_succeeded_attempt_reads_as_the_record_it_was_stored_as(
    driver: Driver, new_job: JobFactory, path: str
) -> None:
    insert(driver, new_job(max_attempts=3))
    (first,) = claim(driver, worker="w1", limit=1)
    _finish_all(driver, path, [(first, states.retry(0, "Boom", "it broke"), 12)])
    (second,) = claim(driver, worker="w2", limit=1)
    _finish_all(driver, path, [(second, states.complete({"ok": 1}), 34)])
    job = get(driver, first.id)
    assert job.finished_at is not None
    with driver.read() as ex:
        failure, success = driver.attempt_list(ex, first.id)
        outcomes = [driver.attempt_outcome(ex, first.id, v) for v in (1, 2, 3)]
    assert failure.outcome == "failed" and failure.worker_id == "w1"
    assert success == Attempt(
        job_id=first.id,
        attempt=2,
        claim_version=2,
        worker_id="w2",
        started_at=second.attempted_at,
        finished_at=job.finished_at,
        runtime_ms=34,
        outcome="succeeded",
        error_code=None,
        error_message=None,
        processed=None,
        failed=None,
        summary=None,
        traceback=None,
    )
    assert outcomes == ["failed", "succeeded", None]


def test_job_requeue_stores_a_succeeded_attempt_before_it_resets_the_row(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    insert(driver, new_job(max_attempts=3))
    (first,) = claim(driver, worker="w1", limit=1)
    _finish_all(driver, "job_finish_many", [(first, states.complete(1), 21)])
    succeeded = get(driver, first.id)
    assert succeeded.finished_at is not None
    with driver.read() as ex:
        before = driver.attempt_list(ex, first.id)
    with driver.transaction() as ex:
        assert driver.job_requeue(ex, first.id, REQUEUEABLE) is not None
        # Requeued again while queued: the record is stored once.
        assert driver.job_requeue(ex, first.id, REQUEUEABLE) is not None
    assert _stored(sql, first.id) == [(1, "succeeded", 21)]
    row = sql.one("SELECT worker_id, runtime_ms FROM durq_jobs WHERE id = :id", id=first.id)
    assert (row["worker_id"], row["runtime_ms"]) == (None, None)
    (second,) = claim(driver, worker="w2", limit=1)
    _finish_all(driver, "job_finish", [(second, states.retry(0, "E", "again"), 22)])
    (third,) = claim(driver, worker="w3", limit=1)
    _finish_all(driver, "job_finish", [(third, states.complete(3), 23)])
    with driver.read() as ex:
        history = driver.attempt_list(ex, first.id)
    assert history[:1] == before
    assert before == [
        Attempt(
            job_id=first.id,
            attempt=1,
            claim_version=1,
            worker_id="w1",
            started_at=first.attempted_at,
            finished_at=succeeded.finished_at,
            runtime_ms=21,
            outcome="succeeded",
            error_code=None,
            error_message=None,
        )
    ]
    assert [
        (a.claim_version, a.attempt, a.worker_id, a.outcome, a.runtime_ms) for a in history
    ] == [
        (1, 1, "w1", "succeeded", 21),
        (2, 1, "w2", "failed", 22),
        (3, 2, "w3", "succeeded", 23),
    ]


def test_job_requeue_of_other_states_stores_nothing_more(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    for _ in range(2):
        insert(driver, new_job(max_attempts=1))
    dead, cancelled = claim(driver, limit=2)
    _finish_all(
        driver,
        "job_finish",
        [(dead, states.dead_letter("Fatal", "no"), 1), (cancelled, states.cancel_running(), 2)],
    )
    with driver.transaction() as ex:
        for job in (dead, cancelled):
            assert driver.job_requeue(ex, job.id, REQUEUEABLE) is not None
    assert _stored(sql, dead.id) == [(1, "failed", 1)]
    assert _stored(sql, cancelled.id) == [(1, "cancelled", 2)]


def test_attempt_report_stores_a_succeeded_attempts_record_with_its_log(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    for _ in range(2):
        insert(driver, new_job(max_attempts=3))
    ok, failed = claim(driver, limit=2)
    _finish_all(
        driver,
        "job_finish_many",
        [(ok, states.complete(), 31), (failed, states.retry(0, "E", "m"), 32)],
    )
    with driver.read() as ex:
        (plain,) = driver.attempt_list(ex, ok.id)
    with driver.transaction() as ex:
        for job in (ok, failed):
            driver.attempt_report(
                ex, job_id=job.id, claim_version=job.claim_version, report=(9, 1, f"of {job.id}")
            )
        # Reported again, the record is updated, never doubled.
        driver.attempt_report(ex, job_id=ok.id, claim_version=1, report=(10, 0, "again"))
        driver.attempt_report(ex, job_id=ok.id, claim_version=2, report=(1, 1, "no such"))
    assert _stored(sql, ok.id) == [(1, "succeeded", 31)]
    assert _stored(sql, failed.id) == [(1, "failed", 32)]
    with driver.read() as ex:
        (ok_record,) = driver.attempt_list(ex, ok.id)
        (failed_record,) = driver.attempt_list(ex, failed.id)
    assert ok_record == replace(plain, processed=10, failed=0, summary="again")
    assert (failed_record.processed, failed_record.failed, failed_record.summary) == (
        9,
        1,
        f"of {failed.id}",
    )


def test_stats_and_metrics_count_each_attempt_once(driver: Driver, new_job: JobFactory) -> None:
    """One queue's history: a success (on its row), a success with a run report (stored),
    a failure then a success, a dead letter, and a success requeued and run again."""
    before = time.time() - 1
    for _ in range(5):
        insert(driver, new_job(queue="q", max_attempts=3))
    plain, reported, retried, dead, again = claim(driver, queue="q", limit=5)
    _finish_all(
        driver,
        "job_finish_many",
        [
            (plain, states.complete(), 3),
            (reported, states.complete(), 8),
            (retried, states.retry(0, "E", "m"), 20),
            (dead, states.dead_letter("Fatal", "no"), 700),
            (again, states.complete(), 4),
        ],
    )
    with driver.transaction() as ex:
        driver.attempt_report(ex, job_id=reported.id, claim_version=1, report=(1, 0, None))
        driver.job_requeue(ex, again.id, REQUEUEABLE)
    retried_2, again_2 = sorted(claim(driver, queue="q", limit=5), key=lambda j: j.id)
    _finish_all(
        driver, "job_finish", [(retried_2, states.complete(), 30), (again_2, states.complete(), 6)]
    )
    with driver.read() as ex:
        (row,) = driver.stats_rollup(ex, before)
        counts = ex.run("attempt_counts")[0]
        pickups = ex.run("pickup_latencies")
        busiest = ex.run("attempts_busiest_second")[0]["n"]
        buckets = driver.attempt_buckets(ex)
        records = [
            a
            for j in (plain, reported, retried, dead, again)
            for a in driver.attempt_list(ex, j.id)
        ]
    # Seven attempts: five successes, a failure that was retried, a dead letter.
    assert (row.queue, row.succeeded, row.failed, row.dead_letter) == ("q", 5, 1, 1)
    # Pickups are known for each job's latest attempt only.
    assert row.pickup_p50_ms is not None and row.pickup_p95_ms is not None
    assert (int(counts["attempts"]), int(counts["retries"])) == (7, 1)
    assert sorted(int(r["attempt"]) for r in pickups) == [1, 1, 1, 1, 2]
    assert all(-1 < float(r["pickup_s"]) < 60 for r in pickups)
    assert len(records) == 7
    per_second = Counter(int(a.finished_at.timestamp()) for a in records)
    assert int(busiest) == max(per_second.values())
    by_outcome: Counter[str] = Counter()
    runtime: Counter[str] = Counter()
    retries: Counter[str] = Counter()
    for b in buckets:
        assert (b.queue, b.task) == ("q", "t")
        by_outcome[b.outcome] += b.count
        runtime[b.outcome] += b.runtime_ms
        retries[b.outcome] += b.retries
    assert by_outcome == {"succeeded": 5, "failed": 2}
    assert runtime == {"succeeded": 3 + 8 + 30 + 4 + 6, "failed": 20 + 700}
    assert retries == {"succeeded": 1, "failed": 0}
