"""Shutdown never lets a job go while its code still runs: a task that ignores the cancel,
or a sync task in a thread, keeps its lease (heartbeated) until it returns, so no other
worker runs the job meanwhile; past the hard deadline the worker exits 1 without
releasing it, and the job returns only when its lease expires with the process."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

import durq

from . import pool_app
from .support import WorkerProcess, wait_until

pytestmark = pytest.mark.slow

APP = "tests.worker.pool_app:app"
FAST_LEASES = ("--lease-seconds", "2", "--heartbeat-seconds", "0.3", "--poll-interval", "0.1")


@pytest.fixture
def app(make_app: Callable[..., durq.App]) -> durq.App:
    app = make_app()
    for task in pool_app.app.tasks.values():
        app.tasks[task.name] = replace(task, app=app)
    return app


def _started(log: str) -> Callable[[], bool]:
    return lambda: "start" in [e for e, _ in pool_app.executions(log)]


def _held_or_let_go(app: durq.App, job: durq.Job, owner: str, beats: int) -> Callable[[], bool]:
    """True once ``owner`` extended the job's lease ``beats`` times, or let the job go."""
    leases: list[object] = []

    def check() -> bool:
        now = app.get_job(job.id)
        if now.state != "running" or now.worker_id != owner:
            return True
        if not leases or leases[-1] != now.lease_expires_at:
            leases.append(now.lease_expires_at)
        return len(leases) > beats

    return check


def test_async_task_swallowing_cancellation_is_not_released_while_it_runs(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    log, gate = str(tmp_path / "runs.log"), tmp_path / "gate"
    job = app.enqueue("swallow_cancel", {"log": log, "gate": str(gate), "seconds": 60})
    first = spawn("--shutdown-timeout", "0.2", *FAST_LEASES, app=APP, name="first")
    wait_until(_started(log), timeout=30, what="the first worker to start the job")
    second = spawn(*FAST_LEASES, app=APP, name="second")
    second.wait_ready(app)

    first.signal(signal.SIGTERM)
    wait_until(
        lambda: "cancel-ignored" in [e for e, _ in pool_app.executions(log)],
        what="the task to ignore the cancel",
    )
    # Longer than a lease: the job stays the first worker's, heartbeated, and the second
    # worker (claiming all the while) never gets it.
    wait_until(_held_or_let_go(app, job, first.worker_id, beats=8), what="heartbeats")
    held = app.get_job(job.id)
    assert (held.state, held.worker_id) == ("running", first.worker_id)
    assert first.proc.poll() is None
    assert "keeping their leases (heartbeated) until their code stops" in first.log()

    gate.touch()  # the task returns on its own: its real outcome is written
    assert first.wait_exit() == 0
    done = app.get_job(job.id)
    assert (done.state, done.attempt, done.result["pid"]) == ("succeeded", 1, first.pid)
    assert [(a.outcome, a.worker_id) for a in app.attempts(job.id)] == [
        ("succeeded", first.worker_id)
    ]
    events = pool_app.executions(log)
    assert [e for e, _ in events].count("start") == 1 and ("overlap", second.pid) not in events


def test_async_task_ignoring_its_timeout_keeps_its_lease_until_it_stops(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    log, gate = str(tmp_path / "runs.log"), tmp_path / "gate"
    job = app.enqueue("swallow_timeout", {"log": log, "gate": str(gate), "seconds": 60})
    worker = spawn(*FAST_LEASES, app=APP)  # the task's timeout is 0.3 s
    wait_until(
        lambda: "cancel-ignored" in [e for e, _ in pool_app.executions(log)],
        timeout=30,
        what="the task to ignore its timeout's cancel",
    )
    wait_until(_held_or_let_go(app, job, worker.worker_id, beats=3), what="heartbeats")
    held = app.get_job(job.id)
    assert (held.state, held.worker_id) == ("running", worker.worker_id)

    gate.touch()  # it stops: only now is its timeout written
    wait_until(lambda: app.get_job(job.id).state == "dead_letter", what="the timeout's outcome")
    assert app.get_job(job.id).last_error_code == "JobTimeout"
    assert [a.outcome for a in app.attempts(job.id)] == ["failed"]


def test_sigterm_keeps_a_sync_task_leased_until_it_returns(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    log, gate = str(tmp_path / "runs.log"), tmp_path / "gate"
    job = app.enqueue("stuck_sync", {"log": log, "gate": str(gate)})
    worker = spawn("--shutdown-timeout", "0.2", *FAST_LEASES, app=APP)
    wait_until(_started(log), timeout=30, what="the job to start")

    worker.signal(signal.SIGTERM)
    wait_until(_held_or_let_go(app, job, worker.worker_id, beats=3), what="heartbeats")
    held = app.get_job(job.id)
    assert (held.state, held.worker_id) == ("running", worker.worker_id)  # not released
    assert "a sync task cannot be interrupted" in worker.log()

    gate.touch()
    assert worker.wait_exit() == 0
    done = app.get_job(job.id)
    assert (done.state, done.attempt) == ("succeeded", 1)
    assert [a.outcome for a in app.attempts(job.id)] == ["succeeded"]


def test_task_running_past_the_hard_deadline_exits_1_without_release(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    log, gate = str(tmp_path / "runs.log"), tmp_path / "gate"
    job = app.enqueue("swallow_cancel", {"log": log, "gate": str(gate), "seconds": 60})
    first = spawn(
        "--shutdown-timeout", "0.2", "--shutdown-hard-timeout", "0.5", *FAST_LEASES,
        app=APP, name="first",
    )  # fmt: skip
    wait_until(_started(log), timeout=30, what="the job to start")

    first.signal(signal.SIGTERM)
    assert first.wait_exit() == 1
    left = app.get_job(job.id)  # not released: only its lease's expiry lets it go
    assert (left.state, left.worker_id, left.attempt) == ("running", first.worker_id, 1)
    assert app.attempts(job.id) == []
    assert "past the hard shutdown deadline" in first.log()

    gate.touch()
    second = spawn("--max-jobs", "1", *FAST_LEASES, app=APP, name="second")
    assert second.wait_exit() == 0
    done = app.get_job(job.id)
    assert (done.state, done.attempt, done.result["pid"]) == ("succeeded", 2, second.pid)
    assert [a.outcome for a in app.attempts(job.id)] == ["lost", "succeeded"]
    assert "overlap" not in [e for e, _ in pool_app.executions(log)]
