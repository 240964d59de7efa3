"""durq behind a real PgBouncer in transaction pooling mode (``DURQ_PGBOUNCER=true``).

Each test's database has one server connection behind PgBouncer, shared by every client:
a statement one client prepared is there when the next client's transaction arrives, which
is what breaks psycopg's automatic preparation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

import durq
from durq.types import JobState

from .. import bouncer, pg
from ..api.conftest import build_api
from ..waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
PREPARE_ERRORS = (
    psycopg.errors.DuplicatePreparedStatement,
    psycopg.errors.InvalidSqlStatementName,
)


def _tasks(app: durq.App) -> durq.Task[..., int]:
    @app.task(max_attempts=2, retry=durq.Fixed([0]))
    def add(x: int, y: int) -> int:
        return x + y

    return add


def test_the_harness_reproduces_psycopgs_prepared_statement_failure(bouncer_url: str) -> None:
    """Two clients with psycopg's default preparation collide on the shared server."""
    a = psycopg.connect(bouncer_url, autocommit=True)
    b = psycopg.connect(bouncer_url, autocommit=True)
    try:
        with pytest.raises(PREPARE_ERRORS):
            for _ in range(8):
                for conn in (a, b):
                    conn.execute("SELECT 1 + %s", (1,)).fetchall()
    finally:
        a.close()
        b.close()


def test_enqueue_more_than_five_times_per_connection(
    make_bounced_app: Callable[..., durq.App],
) -> None:
    apps = [make_bounced_app(pool_max_size=1) for _ in range(2)]
    tasks = [_tasks(app) for app in apps]
    ids = [task.enqueue(x=i, y=1).id for i in range(12) for task in tasks]
    assert len(set(ids)) == 24
    assert len(apps[0].list_jobs(limit=100)) == 24


def test_enqueue_many_through_pgbouncer(make_bounced_app: Callable[..., durq.App]) -> None:
    apps = [make_bounced_app() for _ in range(2)]
    for app in apps:
        _tasks(app)
    for round_ in range(4):
        for app in apps:
            now = app.enqueue_many([("add", {"x": round_, "y": n}) for n in range(20)])
            later = app.enqueue_many(
                [durq.EnqueueRequest("add", {"x": round_, "y": n}, delay=60) for n in range(5)]
            )
            assert len(now) == 20 and len(later) == 5
    assert len(apps[0].list_jobs(limit=1000)) == 2 * 4 * 25


def test_transactional_enqueue_on_psycopg_connections_through_pgbouncer(
    make_bounced_app: Callable[..., durq.App], bouncer_url: str
) -> None:
    """The caller's own connections keep psycopg's defaults: durq prepares nothing on them."""
    app = make_bounced_app()
    add = _tasks(app)
    callers = [psycopg.connect(bouncer_url) for _ in range(2)]
    try:
        committed = []
        for i in range(8):
            for conn in callers:
                with conn.transaction():
                    committed.append(add.enqueue_with({"x": i, "y": 0}, connection=conn).id)
        for conn in callers:
            with pytest.raises(RuntimeError), conn.transaction():
                add.enqueue_with({"x": -1, "y": 0}, connection=conn)
                raise RuntimeError("the caller rolls back")
    finally:
        for conn in callers:
            conn.close()
    assert sorted(job.id for job in app.list_jobs(limit=100)) == sorted(committed)


def test_transactional_enqueue_on_a_sqlalchemy_connection_through_pgbouncer(
    make_bounced_app: Callable[..., durq.App], bouncer_url: str
) -> None:
    app = make_bounced_app()
    add = _tasks(app)
    # SQLAlchemy's own advice for PgBouncer: its psycopg connections prepare nothing.
    engine = create_engine(
        bouncer_url.replace("postgresql://", "postgresql+psycopg://"),
        poolclass=NullPool,
        connect_args={"prepare_threshold": None},
    )
    try:
        committed = []
        for i in range(8):
            with engine.begin() as conn:
                committed.append(add.enqueue_with({"x": i, "y": 0}, connection=conn).id)
        with pytest.raises(RuntimeError), engine.begin() as conn:
            add.enqueue_with({"x": -1, "y": 0}, connection=conn)
            raise RuntimeError("the caller rolls back")
    finally:
        engine.dispose()
    assert sorted(job.id for job in app.list_jobs(limit=100)) == sorted(committed)


def test_a_poll_only_worker_drains_jobs_through_pgbouncer(
    make_bounced_app: Callable[..., durq.App],
) -> None:
    app = make_bounced_app()
    add = _tasks(app)
    jobs = [add.enqueue(x=i, y=i) for i in range(40)]
    worker = durq.Worker(app, concurrency=4, poll_interval=0.05, maintenance=False)
    assert worker.settings.listen_notify is False  # DURQ_PGBOUNCER defaults to polling
    assert worker.notifier.mode == "local"
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert worker.ready.wait(20), "the worker did not start"
        late = [add.enqueue(x=100, y=i) for i in range(10)]  # found by polling, not LISTEN

        def all_done() -> bool:
            return all(app.get_job(j.id).state == JobState.SUCCEEDED for j in [*jobs, *late])

        wait_until(all_done, timeout=60, what="the worker to finish every job")
    finally:
        worker.request_stop()
        thread.join(30)
    assert app.get_job(late[-1].id).result == 109


def test_the_http_service_submits_and_reads_jobs_through_pgbouncer(bouncer_url: str) -> None:
    api = build_api(bouncer_url, pgbouncer=True)
    try:
        ids = [api.submit(task="add", args={"x": i, "y": 1})["id"] for i in range(8)]
        for job_id in ids:
            response = api.call("GET", f"/v1/jobs/{job_id}", "viewer")
            assert response.status_code == 200, response.text
            assert response.json()["data"]["state"] == "queued"
        listed = api.call("GET", "/v1/jobs", "operator", params={"limit": 50})
        assert listed.status_code == 200, listed.text
        assert {job["id"] for job in listed.json()["data"]} == set(ids)
    finally:
        api.close()


def test_durq_migrate_works_through_pgbouncer(pg_admin_url: str, pgbouncer_hostport: str) -> None:
    name = pg.unique_name("durq_bouncer_migrate")
    url = bouncer.through(pg.create_database(pg_admin_url, name), pgbouncer_hostport)
    try:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DURQ_")},
            "DURQ_PGBOUNCER": "true",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        }
        cmd = [sys.executable, "-m", "durq.cli.main", "migrate", "--database-url", url]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("applied migrations"), out.stdout
        again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert (again.returncode, again.stdout.strip()) == (0, "schema is up to date")
        with durq.App(settings=durq.Settings(database_url=url, pgbouncer=True)) as app:
            app.check_schema()
    finally:
        pg.drop_database(pg_admin_url, name)
