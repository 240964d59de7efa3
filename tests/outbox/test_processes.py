"""Seed 003 parity with real processes on both backends: claim exclusivity, lease-expiry
reclaim, stale-write refusal and delivery that loses nothing under kills."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._drivers.sqlite.driver import path_from_url

from ..waiting import wait_until
from ..worker.support import REPO, durq_env
from .conftest import env_for
from .receiver import Receiver, serving

APP = "tests.outbox.apps:app"


class Proc:
    def __init__(self, db_url: str, log_dir: Path, name: str, *args: str, **settings: object):
        self.log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("w")
        env = durq_env(db_url, POD_NAME=name, **env_for(**settings))
        # This checkout's durq first, whatever else the environment has installed.
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "durq.cli.main", *args, "--app", APP],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextmanager
def processes(db_url: str, log_dir: Path) -> Iterator[Callable[..., Proc]]:
    started: list[Proc] = []

    def start(name: str, *args: str, **settings: object) -> Proc:
        proc = Proc(db_url, log_dir, name, *args, **settings)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            if proc.proc.poll() is None:
                os.kill(proc.proc.pid, signal.SIGCONT)
            proc.kill()


def freeze_outside_a_write(proc: Proc, db_url: str, event_id: int) -> None:
    """SIGSTOP ``proc`` at a moment it holds no lock on the event (a process frozen inside
    a write transaction would block every other writer on SQLite, and hold the row on
    PostgreSQL): stop, probe the lock briefly, and resume and try again if it was held."""
    for _ in range(100):
        os.kill(proc.proc.pid, signal.SIGSTOP)
        if _lock_free(db_url, event_id):
            return
        os.kill(proc.proc.pid, signal.SIGCONT)
        time.sleep(0.03)  # let it finish its transaction before the next try
    raise AssertionError("could not freeze the process outside a write transaction")


def _lock_free(db_url: str, event_id: int) -> bool:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(path_from_url(db_url), timeout=0.2, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()
    with psycopg.connect(conninfo_from_url(db_url)) as pg:
        try:
            pg.execute("SET lock_timeout = '200ms'")
            pg.execute("SELECT 1 FROM durq_outbox WHERE id = %s FOR UPDATE", (event_id,))
            pg.rollback()
            return True
        except psycopg.errors.LockNotAvailable:
            return False


def make_events(app: durq.App, url: str, jobs: int, rounds: int = 1) -> list[int]:
    """Jobs with a webhook, each run ``rounds`` times: 3 events per round per job."""
    ids = [app.enqueue("noop", {"n": i}, webhook_url=url).id for i in range(jobs)]
    for r in range(rounds):
        for job_id in ids:
            if r:
                app.requeue(job_id)
            app.run_job(job_id)
    return ids


def test_claim_exclusivity_multi_process(
    outbox_app: Callable[..., durq.App], db_url: str, tmp_path: Path
) -> None:
    app = outbox_app()
    receiver = Receiver()
    with serving(receiver) as url, processes(db_url, tmp_path) as start:
        make_events(app, url, 100)  # 300 events
        for i in range(3):
            start(f"d{i}", "deliver")
        # The receiver answers before the delivery's fenced write: wait for both.
        wait_until(
            lambda: (
                len(receiver.first) == 300
                and all(e.state == "delivered" for e in app.list_events(limit=1000))
            ),
            timeout=60,
            what="300 events received and recorded as delivered",
        )
    events = app.list_events(limit=1000)
    assert len(events) == 300 and all(e.state == "delivered" for e in events)
    # Each event was claimed once and sent once: no two processes ever held it.
    assert {e.claim_version for e in events} == {1}
    assert receiver.duplicates == 0 and sum(receiver.attempts.values()) == 300
    assert len({e.worker_id for e in events}) >= 2  # the work really was shared


def test_lease_expiry_reclaim_multi_process(
    outbox_app: Callable[..., durq.App], db_url: str, tmp_path: Path
) -> None:
    app = outbox_app()
    receiver = Receiver()
    receiver.hang.set()  # the first process's request never returns
    with serving(receiver) as url, processes(db_url, tmp_path) as start:
        job = app.enqueue("noop", {}, webhook_url=url)
        (event,) = app.list_events(job_id=job.id)
        first = start("a", "deliver", webhook_lease_seconds=1)
        wait_until(lambda: receiver.attempts[event.event_id] == 1, what="process a to send")
        held = app.get_event(event.event_id)
        assert held.state == "delivering" and (held.worker_id or "").startswith("a:")
        first.kill()  # SIGKILL: no release, its lease must expire
        receiver.hang.clear()
        start("b", "deliver", webhook_lease_seconds=1)
        wait_until(
            lambda: app.get_event(event.event_id).state == "delivered",
            timeout=30,
            what="process b to reclaim and deliver",
        )
    done = app.get_event(event.event_id)
    assert done.worker_id is not None and done.worker_id.startswith("b:")
    # Reclaim allocated a new claim_version, and b's own claim another.
    assert done.claim_version >= 3 and done.attempt == 2


def test_stale_write_refused_multi_process(
    outbox_app: Callable[..., durq.App], db_url: str, tmp_path: Path
) -> None:
    app = outbox_app()
    receiver = Receiver()
    receiver.hang.set()
    with serving(receiver) as url, processes(db_url, tmp_path) as start:
        job = app.enqueue("noop", {}, webhook_url=url)
        (event,) = app.list_events(job_id=job.id)
        stale = start("a", "deliver", "--log-level", "DEBUG", webhook_lease_seconds=1)
        wait_until(lambda: receiver.attempts[event.event_id] == 1, what="process a to send")
        version_a = app.get_event(event.event_id).claim_version
        freeze_outside_a_write(stale, db_url, event.id)  # no heartbeat: its lease runs out
        receiver.hang.clear()
        receiver.release.set()  # a's request is answered 200, but a cannot act on it yet
        start("b", "deliver", webhook_lease_seconds=1)
        wait_until(
            lambda: (app.get_event(event.event_id).worker_id or "").startswith("b:"),
            timeout=30,
            what="process b to take the event over",
        )
        wait_until(
            lambda: app.get_event(event.event_id).state == "delivered",
            timeout=30,
            what="process b to deliver",
        )
        after_b = app.get_event(event.event_id)
        os.kill(stale.proc.pid, signal.SIGCONT)  # a wakes and writes with its old version
        wait_until(lambda: ": lost" in stale.log(), timeout=30, what="a to report its lost lease")
    final = app.get_event(event.event_id)
    assert version_a < after_b.claim_version
    assert (final.state, final.claim_version, final.worker_id) == (
        "delivered",
        after_b.claim_version,
        after_b.worker_id,
    )


@pytest.mark.slow
def test_outbox_event_delivered_after_worker_killed(
    outbox_app: Callable[..., durq.App], db_url: str, tmp_path: Path
) -> None:
    app = outbox_app()
    receiver = Receiver()
    receiver.hang.set()
    with serving(receiver) as url, processes(db_url, tmp_path) as start:
        job = app.enqueue("noop", {"n": 5}, webhook_url=url)
        worker = start(
            "w1", "worker", webhook_lease_seconds=1, lease_seconds=1, heartbeat_seconds=0.3
        )
        wait_until(lambda: len(receiver.attempts) >= 1, timeout=30, what="the first delivery")
        worker.kill()  # SIGKILL between the state changes and their delivery
        receiver.hang.clear()
        start("w2", "worker", webhook_lease_seconds=1, lease_seconds=1, heartbeat_seconds=0.3)
        # The receiver answers before the delivery's fenced write: wait for both.
        wait_until(
            lambda: (
                [d["type"] for d in receiver.first][-1:] == ["job.succeeded"]
                and all(e.state == "delivered" for e in app.list_events(job_id=job.id))
            ),
            timeout=45,
            what="the job's last event to arrive and be recorded as delivered",
        )
    types = [d["type"] for d in receiver.first]
    assert types[0] == "job.queued" and types[-1] == "job.succeeded"
    assert receiver.first[-1]["data"]["result"] == {"n": 5}
    assert all(e.state == "delivered" for e in app.list_events(job_id=job.id))


SOAK_EVENTS = int(os.environ.get("DURQ_OUTBOX_SOAK_EVENTS", "2004"))


@pytest.mark.slow
def test_outbox_delivery_under_kills_loses_nothing_keeps_order(
    outbox_app: Callable[..., durq.App], db_url: str, tmp_path: Path
) -> None:
    app = outbox_app()
    receiver = Receiver()
    jobs = max(1, SOAK_EVENTS // 6)
    with serving(receiver) as url, processes(db_url, tmp_path) as start:
        make_events(app, url, jobs, rounds=2)  # 6 events per job
        total = jobs * 6
        settings = {"webhook_lease_seconds": 1, "webhook_batch_size": 25}
        live = [start(f"d{i}", "deliver", **settings) for i in range(3)]
        kills, deadline = 0, time.monotonic() + 120
        while (
            len(app.list_events(state="delivered", limit=1000)) < min(total, 1000)
            or len(receiver.first) < total
        ):
            assert time.monotonic() < deadline, f"{len(receiver.first)}/{total} delivered"
            time.sleep(1.5)  # the kill cadence itself, not a wait for a condition
            victim = live.pop(kills % len(live))
            victim.kill()
            kills += 1
            live.append(start(f"d{3 + kills}", "deliver", **settings))
    assert kills >= 2
    seen = [d["event_id"] for d in receiver.first]
    events = app.list_events(limit=1000) + app.list_events(after_id=None, limit=1000)
    stored = {e.event_id for e in app.list_events(limit=1000)}
    after = max(e.id for e in app.list_events(limit=1000))
    while True:
        page = app.list_events(after_id=after, limit=1000)
        if not page:
            break
        stored |= {e.event_id for e in page}
        after = page[-1].id
    assert len(seen) == len(set(seen)) == total == len(stored)
    assert set(seen) == stored  # nothing lost, nothing invented
    del events
    # Order per job: each job's events were first received in sequence order.
    by_job: dict[int, list[int]] = {}
    for document in receiver.first:
        by_job.setdefault(document["job_id"], []).append(document["sequence"])
    assert all(seqs == sorted(seqs) for seqs in by_job.values())
    assert all(len(seqs) == 6 for seqs in by_job.values())
