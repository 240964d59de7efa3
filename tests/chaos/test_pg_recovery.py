"""Workers live through PostgreSQL going away, on a throwaway cluster of their own:
killed connections, restarts and a stopped server. Claims, deliveries, periodic ticks and
shutdown bookkeeping resume within about a second of the database, and each component
says once that the database went away and once that it is back."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

import durq
from durq.settings import Settings

from ..outbox.receiver import Receiver, serving
from ..worker.support import running_worker, wait_until
from . import tasks
from .cluster import Cluster, cluster
from .run import MONITOR, WEBHOOKS, Sampler, Workers
from .run import Config as ChaosConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pg() -> Iterator[Cluster]:
    with cluster() as handle:
        yield handle


@pytest.fixture
def chaos_db(pg: Cluster, request: pytest.FixtureRequest) -> str:
    """A migrated database of its own on the cluster, with the side table."""
    name = re.sub(r"\W", "_", request.node.name)[:50].lower()
    with psycopg.connect(pg.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg.admin_url.rsplit("/", 1)[0] + f"/{name}"
    app = durq.App(url)
    app.migrate()
    app.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(tasks.SIDE_TABLE)
    return url


@pytest.fixture
def make_app(chaos_db: str) -> Iterator[Callable[..., durq.App]]:
    apps: list[durq.App] = []

    def make(**overrides: object) -> durq.App:
        app = durq.App(settings=Settings(database_url=chaos_db, **{**WEBHOOKS, **overrides}))
        app.tasks["record"] = replace(tasks.app.tasks["record"], app=app)  # worker processes
        app.task(name="noop", retry=durq.Fixed([0.05]), max_attempts=100)(_noop)  # in-process
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


def _noop(n: int = 0) -> int:
    return n


def tick() -> None:
    """A periodic task, every second."""


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def test_claims_resume_within_2s_of_the_last_of_repeated_connection_kills(
    pg: Cluster, chaos_db: str, make_app: Callable[..., durq.App], tmp_path: Path
) -> None:
    app = make_app()
    # More than two workers drain in the few seconds the test looks at, however fast the
    # machine: the rest are left queued when it ends.
    app.enqueue_many([("record", {"n": n}) for n in range(20_000)])
    sampler = Sampler(chaos_db)
    sampler.start()
    workers = Workers(chaos_db, ChaosConfig(concurrency=4), tmp_path)
    try:
        for _ in range(2):
            workers.start()
        wait_until(lambda: sampler.succeeded_at(time.monotonic()) > 0, what="jobs to flow")
        for _ in range(10):  # every durq connection killed, every 0.3 s for 3 s
            pg.terminate_backends(_database(chaos_db), keep=MONITOR)
            time.sleep(0.3)
        last_kill = time.monotonic()
        wait_until(lambda: sampler.samples[-1][0] > last_kill + 2.5, what="samples")
        assert sampler.unfinished > 0, "the workers drained before the kills ended"
        resumed = sampler.resumed_after(last_kill)
        assert resumed is not None and resumed < 2.0, f"claims resumed after {resumed}s"
        assert all(p.poll() is None for p in workers.procs), "a worker died"
    finally:
        codes = workers.stop_all()
        sampler.stop()
    assert codes == [0, 0]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_one_warning_per_component_when_the_server_goes_and_one_when_it_is_back(
    pg: Cluster, make_app: Callable[..., durq.App], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    caplog.set_level(logging.INFO)
    with running_worker(
        app, concurrency=2, poll_interval=0.1, lease_seconds=5, heartbeat_seconds=1
    ) as worker:
        wait_until(worker.notifier.listening.is_set, what="LISTEN to be in place")
        pg.stop("fast")
        wait_until(
            lambda: any("LISTEN connection failed" in m for m in _warnings(caplog)),
            what="the worker to notice",
        )
        pg.start()
        wait_until(
            lambda: any("LISTEN durq_jobs is back" in m for m in _warnings(caplog)),
            what="LISTEN to come back",
        )
        job = app.enqueue("noop", {"n": 1})
        wait_until(lambda: app.get_job(job.id).state == "succeeded", what="the job to run")
    warnings = _warnings(caplog)
    gone = [m.split(":")[0] for m in warnings if "the database is unreachable" in m]
    back = [m.split(":")[0] for m in warnings if "the database is back" in m]
    assert len(gone) == len(set(gone)), f"a component warned twice: {warnings}"
    assert sorted(gone) == sorted(back), warnings
    listen_lost = [m.split(":")[0] for m in warnings if "LISTEN connection failed" in m]
    listen_back = [m.split(":")[0] for m in warnings if "LISTEN durq_jobs is back" in m]
    assert sorted(listen_lost) == sorted(listen_back) == ["job wake-ups", "outbox wake-ups"]
    pool_lines = [r for r in caplog.records if r.name == "psycopg.pool" and r.levelno >= 30]
    assert not pool_lines, [r.getMessage() for r in pool_lines]
    assert not [m for m in warnings if "lease lost" in m]


def test_shutdown_marks_the_worker_stopped_once_the_server_is_back(
    pg: Cluster, make_app: Callable[..., durq.App]
) -> None:
    app = make_app()
    with running_worker(app, concurrency=2, poll_interval=0.1) as worker:
        pg.stop("immediate")
        worker.request_stop()
        pg.start()
        assert worker.finished.wait(30), "the worker did not stop"
    assert worker.exit_code == 0
    (row,) = [w for w in app.list_workers() if w.id == worker.worker_id]
    assert row.status == "stopped"


def test_deliveries_and_periodic_ticks_resume_after_an_immediate_restart(
    pg: Cluster, make_app: Callable[..., durq.App]
) -> None:
    app = make_app()
    app.periodic(cron="* * * * * *", queue="ticks")(tick)
    receiver = Receiver()
    with serving(receiver) as hook, running_worker(app, concurrency=4, poll_interval=0.1):
        before = [app.enqueue("noop", {"n": n}, webhook_url=hook) for n in range(5)]
        wait_until(lambda: len(receiver.seen) >= 5, what="the first events")
        wait_until(lambda: _ticks(app) > 0, what="a first periodic tick")
        pg.restart("immediate")
        back = time.monotonic()
        ticks = _ticks(app)
        after = [app.enqueue("noop", {"n": n}, webhook_url=hook) for n in range(5, 10)]
        wait_until(lambda: _ticks(app) > ticks, timeout=4, what="a tick after the restart")
        wait_until(
            lambda: all(app.get_job(j.id).state == "succeeded" for j in before + after),
            what="every job",
        )

        def delivered() -> bool:
            events = [e for j in before + after for e in app.list_events(job_id=j.id)]
            return all(e.state == "delivered" and e.event_id in receiver.seen for e in events)

        wait_until(delivered, what="every event delivered and received")
        assert time.monotonic() - back < 20


def _ticks(app: durq.App) -> int:
    return len(app.list_jobs(task="tick"))
