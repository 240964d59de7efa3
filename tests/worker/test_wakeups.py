"""How an idle worker learns of new jobs: NOTIFY on PostgreSQL, a socket beside the file on
SQLite, an in-process signal when the enqueuer shares the worker's process, polling
otherwise. Each test asserts the source
of the wake-up the producer recorded, never a wall-clock bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from psycopg import Connection

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._engine import notices
from durq._worker.runner import Worker

from .support import (
    REPO,
    adopt_test_tasks,
    durq_env,
    run_cli,
    running_worker,
    wait_until,
    worker_processes,
)

SLOW_POLL = 30.0  # a poll tick never comes during these tests


def _app(url: str) -> durq.App:
    app = durq.App(url)

    @app.task
    def anything(n: int = 0) -> int:
        return n

    return app


def _idle(worker: Worker) -> None:
    producer = worker.producer
    assert producer is not None
    wait_until(producer.idle.is_set, what="the worker to sit idle")


def _run_and_reason(app: durq.App, worker: Worker, job_id: int) -> str | None:
    wait_until(lambda: app.get_job(job_id).state == "succeeded", what=f"job {job_id} to run")
    assert worker.producer is not None
    return worker.producer.reason_for(job_id)


def test_listen_notify_wakes_an_idle_worker_on_postgres(pg_url: str) -> None:
    app = _app(pg_url)
    enqueuer = durq.App(pg_url)
    with running_worker(app, poll_interval=SLOW_POLL) as worker:
        assert worker.notifier is not None and worker.notifier.mode == "listen"
        wait_until(worker.notifier.listening.is_set, what="LISTEN to be in place")
        _idle(worker)
        # An App's own commits wake this process's workers directly ("local", below); a
        # job written in the caller's transaction is committed by the caller, so only the
        # database's NOTIFY can tell the worker.
        with Connection.connect(conninfo_from_url(pg_url)) as conn:
            job = enqueuer.enqueue("anything", {"n": 1}, connection=conn)
            conn.commit()
        assert _run_and_reason(app, worker, job.id) == "notify"
        # From another process too (the usual case): `durq enqueue` in a subprocess.
        _idle(worker)
        done = run_cli(pg_url, "enqueue", "anything", "--args", '{"n": 2}', "--json")
        assert done.returncode == 0, done.stderr
        assert _run_and_reason(app, worker, json.loads(done.stdout)["id"]) == "notify"
    enqueuer.close()
    app.close()


def test_an_enqueue_in_another_process_wakes_an_idle_worker_on_sqlite(sqlite_url: str) -> None:
    app = _app(sqlite_url)
    with running_worker(app, poll_interval=SLOW_POLL) as worker:
        assert worker.notifier is not None and worker.notifier.mode == "listen"
        wait_until(worker.notifier.listening.is_set, what="the wake-up socket to be bound")
        for n in (1, 2):  # the second proves the socket still listens after a wake-up
            _idle(worker)
            done = run_cli(sqlite_url, "enqueue", "anything", "--args", f'{{"n": {n}}}', "--json")
            assert done.returncode == 0, done.stderr
            assert _run_and_reason(app, worker, json.loads(done.stdout)["id"]) == "notify"
    app.close()


WAKE_AFTER_OWN_COMMIT = """
import sqlite3, sys
import durq
from durq._drivers.sqlite.driver import path_from_url
app = durq.App(sys.argv[1])
conn = sqlite3.connect(path_from_url(sys.argv[1]))
job = app.enqueue("anything", {"n": 3}, connection=conn, unchecked=True)
conn.commit()
print(job.id, app.wake(["default"]))
"""


def test_wake_after_the_callers_own_commit_wakes_a_worker_in_another_process_on_sqlite(
    sqlite_url: str,
) -> None:
    app = _app(sqlite_url)
    with running_worker(app, poll_interval=SLOW_POLL) as worker:
        assert worker.notifier is not None
        wait_until(worker.notifier.listening.is_set, what="the wake-up socket to be bound")
        _idle(worker)
        done = subprocess.run(
            [sys.executable, "-c", WAKE_AFTER_OWN_COMMIT, sqlite_url],
            cwd=REPO,
            env=durq_env(sqlite_url),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        job_id, woken = done.stdout.split()
        assert woken == "True"
        assert _run_and_reason(app, worker, int(job_id)) == "notify"
    app.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql-poll-only"])
def test_in_process_enqueue_wakes_the_worker_without_listen(
    backend: str, sqlite_url: str, request: pytest.FixtureRequest
) -> None:
    url = sqlite_url if backend == "sqlite" else str(request.getfixturevalue("pg_url"))
    app = _app(url)
    with running_worker(app, poll_interval=SLOW_POLL, listen_notify=False) as worker:
        assert worker.notifier is not None and worker.notifier.mode == "local"
        _idle(worker)
        with durq.App(url) as other:  # any App of this process on this database
            job = other.enqueue("anything")
        assert _run_and_reason(app, worker, job.id) == "local"
        _idle(worker)
        (bulk,) = app.enqueue_many([("anything", {"n": 2})])
        assert _run_and_reason(app, worker, bulk.id) == "local"
    app.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql-poll-only"])
def test_jobs_from_another_process_are_found_by_polling(
    backend: str, sqlite_url: str, request: pytest.FixtureRequest
) -> None:
    url = sqlite_url if backend == "sqlite" else str(request.getfixturevalue("pg_url"))
    app = _app(url)
    with running_worker(app, poll_interval=0.2, listen_notify=False) as worker:
        _idle(worker)
        done = run_cli(url, "enqueue", "anything", "--json")
        assert done.returncode == 0, done.stderr
        assert _run_and_reason(app, worker, json.loads(done.stdout)["id"]) == "poll"
    app.close()


def test_a_scheduled_job_wakes_the_worker_when_it_comes_due(db_url: str) -> None:
    app = _app(db_url)
    with running_worker(app, poll_interval=SLOW_POLL, listen_notify=False) as worker:
        _idle(worker)
        with durq.App(db_url) as other:
            job = other.enqueue("anything", delay=0.5)
        assert _run_and_reason(app, worker, job.id) == "due"
    app.close()


def test_one_notification_per_queue_per_transaction(pg_url: str) -> None:
    app = durq.App(pg_url)
    with Connection.connect(conninfo_from_url(pg_url), autocommit=True) as listener:
        listener.execute("LISTEN durq_jobs")
        app.enqueue_many([("t", {"n": n}) for n in range(50)])
        app.enqueue_many(
            [durq.EnqueueRequest("t", {"n": n}, queue="other") for n in range(5)]
            + [("t", {"n": 99})]
        )
        app.enqueue("t", {"n": 100})
        got = sorted(n.payload for n in listener.notifies(timeout=1.0))
    # 50 jobs in one transaction: one NOTIFY; a mixed batch: one per queue; a single: one.
    assert got == sorted(["default", "default", "other", "default"])
    app.close()


def test_a_burst_of_single_enqueues_shares_its_wake_ups_and_none_waits_for_a_poll(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window long enough that the burst surely falls in a few of them, however slow
    # the machine; the default is a few milliseconds.
    monkeypatch.setattr(notices, "WINDOW", 0.5)
    app = adopt_test_tasks(durq.App(pg_url))
    with (
        worker_processes(pg_url, tmp_path) as spawn,
        Connection.connect(conninfo_from_url(pg_url), autocommit=True) as listener,
    ):
        listener.execute("LISTEN durq_jobs")
        spawn("--poll-interval", str(SLOW_POLL))
        wait_until(lambda: _listening(listener) >= 2, what="the worker to LISTEN")

        jobs = [app.enqueue("ok", {"n": n}) for n in range(100)]
        # Found through the NOTIFYs, the last ones sent after the window's end: the
        # worker's next poll is 30 s away.
        wait_until(lambda: all_succeeded(app, jobs), what="every job of the burst to run")
        heard = [n.payload for n in listener.notifies(timeout=1.0)]
    sent = app._single_notices(app.driver)
    assert sent is not None
    assert heard == ["default"] * sent.sent
    assert 1 <= sent.sent < len(jobs)
    app.close()


def _listening(conn: Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND query = 'LISTEN durq_jobs'"
    ).fetchone()
    return int(row[0]) if row else 0


def all_succeeded(app: durq.App, jobs: list[durq.Job]) -> bool:
    return all(app.get_job(j.id).state == "succeeded" for j in jobs)
