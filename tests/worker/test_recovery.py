"""A worker meets its database going away: an outcome write whose commit went unanswered
is read back rather than reported as a lost lease, and SQLite locked past its busy
timeout (by another real process) is waited out, never a failed attempt."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import durq
from durq import states
from durq._drivers import DeliveryWrite, Driver, FinishRequest, open_driver
from durq._drivers.sqlite.driver import path_from_url
from durq._engine import delivery, keyed
from durq._engine.outage import Outage
from durq._worker.completer import Completer
from durq.errors import DatabaseUnavailable, LeaseLost
from durq.types import Finished, OutboxEvent

from .support import running_worker, wait_until


def _claimed(app: durq.App) -> durq.Job:
    app.enqueue("t", {})
    with app.driver.transaction() as ex:
        (job,) = app.driver.job_claim(
            ex, queue="default", worker_id="w1", limit=1, lease_seconds=30
        )
    return job


def _write_with(
    driver: Driver, write_batch: Callable[[Sequence[FinishRequest]], Sequence[Any]], job: durq.Job
) -> tuple[list[Any], Completer[str, FinishRequest]]:
    """Write one success through a Completer whose writes go through ``write_batch``."""
    answers: list[Any] = []

    async def main() -> Completer[str, FinishRequest]:
        loop = asyncio.get_running_loop()

        async def db(fn: Callable[..., Any], *args: Any) -> Any:
            return await loop.run_in_executor(None, fn, *args)

        completer: Completer[str, FinishRequest] = Completer(
            driver,
            db=db,
            on_written=lambda entry, req, result: answers.append(result),
            write_batch=write_batch,
        )
        completer.start()
        completer.submit("entry", FinishRequest.for_job(job, "w1", states.complete({}), 5))
        assert await completer.stop(20), "the outcome was not written"
        return completer

    return answers, asyncio.run(main())


def test_outcome_whose_commit_went_unanswered_is_read_back_not_reported_lost(
    app: durq.App, caplog: pytest.LogCaptureFixture
) -> None:
    app.task(name="t")(lambda: None)
    job = _claimed(app)
    tries = 0

    def commits_then_drops(reqs: Sequence[FinishRequest]) -> list[Any]:
        nonlocal tries
        tries += 1
        written = keyed.finish_batch(app.driver, reqs)  # really committed...
        if tries == 1:  # ...but the answer is lost with the connection
            raise DatabaseUnavailable("lost the connection: server closed the connection")
        return list(written)

    caplog.set_level(logging.INFO, logger="durq")
    answers, completer = _write_with(app.driver, commits_then_drops, job)

    assert tries == 2  # the retry matched nothing: the first try had landed
    (answer,) = answers
    assert isinstance(answer, Finished) and answer.state == "succeeded"
    assert (completer.written, completer.found_written) == (1, 1)
    assert [(a.claim_version, a.outcome) for a in app.attempts(job.id)] == [(1, "succeeded")]
    assert "lease lost" not in caplog.text


def test_outcome_really_taken_over_is_still_reported_lost(app: durq.App) -> None:
    app.task(name="t")(lambda: None)
    job = _claimed(app)
    tries = 0

    def drops_then_writes(reqs: Sequence[FinishRequest]) -> list[Any]:
        nonlocal tries
        tries += 1
        if tries == 1:  # the first try never reached the database; meanwhile the
            # lease expired and the reclaimer took the job
            with app.driver.transaction() as ex:
                lost = states.retry(0, "lost", "lease expired", lost=True)
                app.driver.job_finish(ex, FinishRequest.for_job(job, "w1", lost, None))
            raise DatabaseUnavailable("lost the connection: server closed the connection")
        return list(keyed.finish_batch(app.driver, reqs))

    answers, completer = _write_with(app.driver, drops_then_writes, job)

    (answer,) = answers
    assert isinstance(answer, LeaseLost)
    assert (completer.written, completer.found_written) == (0, 0)
    assert [a.outcome for a in app.attempts(job.id)] == ["lost"]


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def test_sqlite_locked_past_the_busy_timeout_is_retried_not_a_job_failure(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = durq.App(settings=durq.Settings(database_url=sqlite_url, sqlite_busy_timeout_ms=100))
    app.migrate()
    start, finish = threading.Event(), threading.Event()

    @app.task(name="locked_out", pass_context=True, max_attempts=1)
    def locked_out(ctx: durq.JobContext) -> str:
        start.set()
        assert finish.wait(30)
        ctx.heartbeat()  # a write of the task's own, while another process holds the lock
        return "done"

    caplog.set_level(logging.WARNING, logger="durq")
    job = app.enqueue("locked_out", {})
    with running_worker(app, concurrency=1, poll_interval=0.1, lease_seconds=30):
        assert start.wait(20), "the job did not start"
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, path_from_url(sqlite_url)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            finish.set()
            # The task's heartbeat and the worker's own writes meet "database is locked"
            # well past the 100 ms busy timeout, and keep trying.
            wait_until(
                lambda: "database is unreachable" in caplog.text,
                what="a write to meet the lock",
            )
            wait_until(lambda: "locked" in caplog.text, what="the lock to be named")
        finally:
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.close()
            holder.wait(10)
        wait_until(lambda: app.get_job(job.id).state == "succeeded", what="the job to succeed")
        # Every part that met the lock says once that it is back (the outbox's claims
        # retry on their own clock, up to a second later than the job's writes).
        wait_until(
            lambda: (
                caplog.text.count("the database is back")
                >= caplog.text.count("the database is unreachable")
            ),
            what="each part that met the lock to say the database is back",
        )
    assert "the database is back" in caplog.text
    done = app.get_job(job.id)
    assert (done.attempt, done.result) == (1, "done")
    assert [a.outcome for a in app.attempts(job.id)] == ["succeeded"]
    app.close()


def test_delivery_outcome_whose_commit_went_unanswered_is_read_back(db_url: str) -> None:
    app = durq.App(
        settings=durq.Settings(database_url=db_url, webhook_secrets={"*": ["whsec-recovery"]})
    )
    app.migrate()
    app.task(name="t")(lambda: None)
    app.enqueue("t", {}, webhook_url="http://127.0.0.1:9/hook")
    driver = app.driver
    with driver.transaction() as ex:
        (event,) = driver.outbox_claim(ex, worker_id="w1", limit=1, lease_seconds=30)
    write = DeliveryWrite(event.id, event.claim_version, "delivered", status=200)
    tries = 0

    def commits_then_drops(writes: Sequence[DeliveryWrite]) -> list[Any]:
        nonlocal tries
        tries += 1
        written = driver.finish_deliveries(writes)
        if tries == 1:
            raise DatabaseUnavailable("lost the connection: server closed the connection")
        return list(written)

    answers: list[Any] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def db(fn: Callable[..., Any], *args: Any) -> Any:
            return await loop.run_in_executor(None, fn, *args)

        completer: Completer[OutboxEvent, DeliveryWrite] = Completer(
            driver,
            db=db,
            on_written=lambda entry, req, result: answers.append(result),
            write_batch=commits_then_drops,
            recheck=partial(delivery.reread_writes, driver),
        )
        completer.start()
        completer.submit(event, write)
        assert await completer.stop(20)

    asyncio.run(main())
    (answer,) = answers
    assert tries == 2
    assert isinstance(answer, OutboxEvent) and answer.state == "delivered"
    app.close()


def test_outage_warns_once_when_the_database_goes_and_once_when_it_is_back(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    driver = open_driver(sqlite_url)
    outage = Outage("claims", driver, logging.getLogger("durq.worker"))
    caplog.set_level(logging.WARNING, logger="durq.worker")
    gone = DatabaseUnavailable("lost the connection: server closed the connection")
    delays = [outage.failed(gone) for _ in range(8)]
    assert delays == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]  # capped near a second
    outage.ok()
    outage.ok()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages  # eight failures, two successes: two lines
    assert messages[0].startswith("claims: the database is unreachable (DatabaseUnavailable")
    assert messages[1].startswith("claims: the database is back after")
    caplog.clear()
    bug = ValueError("a bug, not an outage")
    other = [outage.failed(bug) for _ in range(9)]
    assert max(other) == 5.0 and len(caplog.records) == 9  # each one logged: retrying won't fix it
    driver.close()
