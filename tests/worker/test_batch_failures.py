"""One bad job never stalls the others: every batch point has a failure policy.

Each test puts one poisoned job among healthy ones and checks that only the poisoned job
is affected: an outcome the database refuses is dead-lettered as ``outcome_unwritable``
while the rest of its batch is written; a retry policy that cannot be read dead-letters
its job without stopping the worker or the reclaimer; a huge delay is clamped.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import durq
from durq._drivers.sqlite.driver import path_from_url
from durq.retry import MAX_DELAY_SECONDS, Exponential

from ..waiting import wait_until

HEALTHY = 100


class MysteryPolicy:
    """A retry policy that stores a kind no reader knows (as if written by a newer durq)."""

    def delay_for(self, attempt: int, rng: Any = None) -> float:
        return 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "mystery"}


def poisoned_app(db_url: str) -> durq.App:
    app = durq.App(db_url)

    @app.task
    def ok(n: int, poison: bool = False) -> dict[str, int]:
        return {"n": n}

    @app.task(max_attempts=3)
    def far_retry() -> None:
        raise durq.Retry(after=1e13)

    @app.task(max_attempts=1)
    def nul_result() -> str:
        return "a\x00b"

    @app.task(retry=MysteryPolicy(), max_attempts=3)
    def mystery() -> None:
        raise RuntimeError("the upstream answered 500")

    return app


def refuse_success_of_poisoned_jobs(db_url: str) -> None:
    """A trigger in the real database refuses to mark a job with ``poison`` succeeded: an
    outcome the database will never accept, whatever is retried."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(path_from_url(db_url))
        conn.execute(
            "CREATE TRIGGER refuse_poison BEFORE UPDATE ON durq_jobs "
            "WHEN NEW.state = 'succeeded' AND json_extract(NEW.args, '$.poison') "
            "BEGIN SELECT RAISE(ABORT, 'refused: poisoned job'); END"
        )
        conn.commit()
        conn.close()
        return
    with psycopg.connect(db_url, autocommit=True) as pg:
        pg.execute(
            "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.state = 'succeeded' AND (NEW.args->>'poison')::boolean THEN "
            "RAISE EXCEPTION 'refused: poisoned job'; END IF; RETURN NEW; END $$"
        )
        pg.execute(
            "CREATE TRIGGER refuse_poison BEFORE UPDATE ON durq_jobs "
            "FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
        )


def run_worker(app: durq.App, **options: Any) -> durq.Worker:
    worker = durq.Worker(app, poll_interval=0.05, **options)
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False})
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the worker did not finish its jobs within 120 s"
    return worker


def test_poison_outcomes_affect_only_their_own_jobs(db_url: str) -> None:
    app = poisoned_app(db_url)
    refuse_success_of_poisoned_jobs(db_url)
    healthy = [app.enqueue("ok", {"n": i}) for i in range(HEALTHY // 2)]
    poisoned = app.enqueue("ok", {"n": -1, "poison": True})
    far = app.enqueue("far_retry")
    nul = app.enqueue("nul_result")
    healthy += [app.enqueue("ok", {"n": i}) for i in range(HEALTHY // 2, HEALTHY)]

    worker = run_worker(app, concurrency=50, max_jobs=HEALTHY + 3)

    assert worker.exit_code == 0
    assert [str(app.get_job(j.id).state) for j in healthy] == ["succeeded"] * HEALTHY
    bad = app.get_job(poisoned.id)
    assert (bad.state, bad.last_error_code) == ("dead_letter", "outcome_unwritable")
    assert "refused: poisoned job" in (bad.last_error or "")
    assert [a.outcome for a in app.attempts(poisoned.id)] == ["failed"]
    later = app.get_job(far.id)
    assert later.state == "retry_wait"
    # Clamped to the documented maximum, not an overflow.
    wait = (later.run_at - datetime.now(UTC)).total_seconds()
    assert MAX_DELAY_SECONDS - 120 < wait <= MAX_DELAY_SECONDS
    assert app.get_job(nul.id).last_error_code == "result_not_json"
    assert app.list_jobs(state="running") == []
    assert worker.completer.unwritable == 1
    app.close()


def test_a_policy_that_cannot_be_read_dead_letters_its_job_and_work_goes_on(db_url: str) -> None:
    app = poisoned_app(db_url)
    bad = app.enqueue("mystery")
    healthy = [app.enqueue("ok", {"n": i}) for i in range(10)]

    worker = run_worker(app, concurrency=4, max_jobs=11)

    assert worker.exit_code == 0
    job = app.get_job(bad.id)
    assert (job.state, job.last_error_code) == ("dead_letter", "outcome_unwritable")
    assert "unknown retry policy kind 'mystery'" in (job.last_error or "")
    assert all(app.get_job(j.id).state == "succeeded" for j in healthy)
    app.close()


def test_reclaim_goes_on_past_a_job_whose_policy_cannot_be_read(db_url: str) -> None:
    app = poisoned_app(db_url)
    bad = app.enqueue("mystery")
    others = [app.enqueue("ok", {"n": i}) for i in range(5)]
    driver = app.driver
    with driver.transaction() as ex:  # a worker claims them all, then dies
        claimed = driver.job_claim(
            ex, queue="default", worker_id="dead:1", limit=10, lease_seconds=0.05
        )
    assert len(claimed) == 6
    wait_until(
        lambda: len(app.reclaim_expired()) == 0 and _none_running(app),
        timeout=20,
        what="every expired lease to be reclaimed",
    )
    job = app.get_job(bad.id)
    assert (job.state, job.last_error_code) == ("dead_letter", "outcome_unwritable")
    assert [a.outcome for a in app.attempts(bad.id)] == ["lost"]
    for other in others:
        after = app.get_job(other.id)
        assert (after.state, after.last_error_code) == ("retry_wait", "lease_expired")
    app.close()


def _none_running(app: durq.App) -> bool:
    return app.list_jobs(state="running") == []


def test_exponential_delays_never_overflow() -> None:
    default = Exponential(base=2.0, factor=2.0, jitter=0.1, cap=3600.0)
    assert 3600 * 0.9 <= default.delay_for(1_100) <= 3600
    assert Exponential(base=2.0).delay_for(10**6) == MAX_DELAY_SECONDS
    assert durq.Retry(after=1e13).after == MAX_DELAY_SECONDS
    assert durq.Snooze(1e13).seconds == MAX_DELAY_SECONDS


def test_worker_leaves_app_settings_alone_and_tasks_see_its_lease(db_url: str) -> None:
    app = durq.App(db_url)
    seen: list[float] = []

    @app.task(pass_context=True)
    def lease(ctx: durq.JobContext) -> None:
        ctx.heartbeat()
        job = app.get_job(ctx.job.id)
        assert job.lease_expires_at is not None and job.attempted_at is not None
        seen.append((job.lease_expires_at - datetime.now(UTC)).total_seconds())

    before = app.settings.model_dump()
    app.enqueue("lease")
    run_worker(app, lease_seconds=45, heartbeat_seconds=5, max_jobs=1)
    assert app.settings.model_dump() == before
    assert len(seen) == 1 and 40 < seen[0] <= 45
    app.close()


@contextmanager
def write_lock(db_url: str) -> Iterator[None]:
    """Hold the database's write lock (SQLite) or every job row's lock (PostgreSQL)."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(path_from_url(db_url), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    with psycopg.connect(db_url) as pg:
        pg.execute("SELECT id FROM durq_jobs FOR UPDATE")
        yield
        pg.rollback()


def test_a_failed_final_flush_exits_1(db_url: str) -> None:
    app = durq.App(db_url, settings=durq.Settings(sqlite_busy_timeout_ms=50))
    gate = threading.Event()

    @app.task
    def waits() -> None:
        gate.wait(30)

    job = app.enqueue("waits")
    worker = durq.Worker(app, poll_interval=0.05, flush_timeout=1.0, maintenance=False)
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False})
    thread.start()
    wait_until(lambda: app.get_job(job.id).state == "running", what="the job to start")
    locked = write_lock(db_url)
    locked.__enter__()
    try:
        gate.set()  # the outcome is ready, and cannot be written while the lock is held
        worker.request_stop()
        wait_until(lambda: worker.completer.gave_up, what="the final flush to give up")
    finally:
        locked.__exit__(None, None, None)
    thread.join(60)
    assert not thread.is_alive()
    assert worker.exit_code == 1
    app.close()


@pytest.mark.parametrize("delay", [timedelta(hours=1)])
def test_run_job_leaves_a_job_scheduled_later_alone(db_url: str, delay: timedelta) -> None:
    app = poisoned_app(db_url)
    later = app.enqueue("ok", {"n": 1}, run_at=datetime.now(UTC) + delay)
    assert app.run_job(later.id).state == "queued"
    assert app.get_job(later.id).attempt == 0
    app.close()
