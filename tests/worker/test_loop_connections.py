"""Where the worker's claims and outcome writes run: on PostgreSQL on its event loop, over
connections of their own (a lost one is replaced, never used again); on SQLite in its
database threads. (With tracing on, claims stay in the threads: tests/otel.)"""

from __future__ import annotations

from typing import Any

import psycopg

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._worker.runner import Worker

from .support import running_worker, wait_until


def _app(url: str, **settings: Any) -> durq.App:
    app = durq.App(settings=durq.Settings(database_url=url, **settings))

    @app.task
    async def noop(n: int = 0) -> int:
        return n

    @app.task(max_attempts=1)
    async def flaky(fail: bool = False) -> None:
        if fail:
            raise RuntimeError("provider down")

    return app


def _all_succeeded(app: durq.App, jobs: list[durq.Job]) -> bool:
    return all(app.get_job(j.id).state == "succeeded" for j in jobs)


def _terminate_others(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Ends every other session on this database (the worker's pool, listener and claims
    connection); how many."""
    rows = conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()
    return len(rows)


def _loop_claims(worker: Worker) -> int:
    assert worker.producer is not None
    return worker.producer.loop_claims


def test_a_worker_on_postgres_claims_and_writes_outcomes_on_its_event_loop(pg_url: str) -> None:
    app = _app(pg_url)
    try:
        jobs = [app.enqueue("noop", {"n": i}) for i in range(40)]
        with running_worker(app, concurrency=8) as worker:
            wait_until(lambda: _all_succeeded(app, jobs), what="the jobs to run")
        # Stopped: every claim it made (empty ones too) and every outcome batch it wrote
        # went through its event-loop connections.
        assert worker.producer is not None and worker.producer.claimed == 40
        assert _loop_claims(worker) == sum(worker.producer.wakeups.values()) >= 1
        assert worker.completer.loop_writes == worker.completer.batches >= 1
    finally:
        app.close()


def test_a_lost_claims_connection_is_replaced_and_the_jobs_still_run(pg_url: str) -> None:
    app = _app(pg_url)
    try:
        with (
            psycopg.connect(conninfo_from_url(pg_url), autocommit=True) as admin,
            running_worker(app, concurrency=4) as worker,
        ):
            first = app.enqueue("noop", {"n": 0})
            wait_until(lambda: _all_succeeded(app, [first]), what="the first job to run")
            before = _loop_claims(worker)
            assert before >= 1 and _terminate_others(admin) >= 1
            later = _app(pg_url)  # a client of its own: this App's pool was cut off too
            try:
                jobs = [later.enqueue("noop", {"n": i}) for i in range(1, 30)]
                wait_until(lambda: _all_succeeded(later, jobs), what="the jobs after the loss")
            finally:
                later.close()
            assert _loop_claims(worker) > before
    finally:
        app.close()


def test_a_worker_on_sqlite_claims_in_its_database_threads(sqlite_url: str) -> None:
    app = _app(sqlite_url)
    try:
        jobs = [app.enqueue("noop", {"n": i}) for i in range(10)]
        with running_worker(app, concurrency=4) as worker:
            wait_until(lambda: _all_succeeded(app, jobs), what="the jobs to run")
            assert worker.producer is not None and worker.producer.claimed == 10
            assert _loop_claims(worker) == 0 and worker.completer.loop_writes == 0
    finally:
        app.close()


def test_loop_connections_off_keeps_a_postgres_worker_on_its_pool(pg_url: str) -> None:
    app = _app(pg_url, loop_connections=False)
    try:
        jobs = [app.enqueue("noop", {"n": i}) for i in range(20)]
        with running_worker(app, concurrency=4) as worker:
            wait_until(lambda: _all_succeeded(app, jobs), what="the jobs to run")
            assert worker.loop_conns is None
            assert _loop_claims(worker) == 0 and worker.completer.loop_writes == 0
            assert worker.producer is not None and worker.producer.claimed == 20
    finally:
        app.close()


def test_breaker_keyed_outcomes_take_the_loop_only_while_their_breaker_is_healthy(
    pg_url: str,
) -> None:
    app = _app(pg_url)
    try:
        with running_worker(app, concurrency=4) as worker:
            completer = worker.completer

            def run(*jobs: durq.Job) -> None:
                wait_until(
                    lambda: all(app.get_job(j.id).is_terminal for j in jobs),
                    what="the jobs to finish",
                )

            run(*(app.enqueue("flaky", breaker_key="k") for _ in range(10)))
            assert completer.loop_writes == completer.batches  # healthy: plain writes
            threaded = completer.batches - completer.loop_writes
            run(app.enqueue("flaky", {"fail": True}, breaker_key="k"))
            assert app.get_breaker("k").consecutive_failures == 1  # the rule ran
            run(app.enqueue("flaky", breaker_key="k"))
            assert app.get_breaker("k").consecutive_failures == 0  # a success resets it
            assert completer.batches - completer.loop_writes >= threaded + 2
    finally:
        app.close()
