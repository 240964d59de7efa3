"""Task processes: a task that crashes its process fails only its own attempt, recorded as
``crashed`` with the exit code or signal; the worker and the jobs beside it go on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

import durq
from durq._worker.processes import ImportPath
from durq.states import Crashed, outcome_to_change

from . import pool_app
from .support import WorkerProcess, all_in, wait_until

pytestmark = pytest.mark.slow

APP = "tests.worker.pool_app:app"


@pytest.fixture
def app(make_app: Callable[..., durq.App]) -> durq.App:
    """This test's App, with the pool app's task defaults (retry policy, attempts)."""
    app = make_app()
    for task in pool_app.app.tasks.values():
        app.tasks[task.name] = replace(task, app=app)
    return app


def test_process_pool_crash_fails_only_its_attempt_and_neighbours_succeed(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    crash = app.enqueue("crash_exit", {"code": 1})
    neighbours = [app.enqueue("neighbour", {"seconds": 0.3}) for _ in range(4)]
    neighbours.append(app.enqueue("async_neighbour", {}))
    worker = spawn(
        "--pool", "process", "--concurrency", "3", "--max-tasks-per-child", "2",
        "--max-jobs", "6", app=APP,
    )  # fmt: skip
    assert worker.wait_exit(timeout=45) == 0  # alive through the crash, to its last job

    after = app.get_job(crash.id)
    assert (after.state, after.last_error_code) == ("dead_letter", "crashed")
    ((attempt),) = app.attempts(crash.id)
    assert (attempt.outcome, attempt.error_code, attempt.worker_id) == (
        "crashed",
        "crashed",
        worker.worker_id,
    )
    assert "exited with code 1" in (attempt.error_message or "")

    assert all_in(app, neighbours, "succeeded")()
    pids = Counter(app.get_job(j.id).result["pid"] for j in neighbours)
    assert worker.pid not in pids  # every task ran in a task process, async ones too
    assert max(pids.values()) <= 2  # each process retired after two jobs
    assert "exited with code 1" in worker.log()


def test_isolated_task_killed_by_a_signal_is_recorded_and_retried_under_its_policy(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    crash = app.enqueue("crash_kill", {})  # isolated=True, Fixed([0]), max_attempts=2
    beside = app.enqueue("neighbour", {"seconds": 0.1})
    worker = spawn("--concurrency", "2", "--max-jobs", "3", app=APP)
    assert worker.wait_exit(timeout=45) == 0

    after = app.get_job(crash.id)
    assert (after.state, after.attempt, after.last_error_code) == ("dead_letter", 2, "crashed")
    attempts = app.attempts(crash.id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "crashed"), (2, "crashed")]
    assert all("killed by signal SIGKILL (9)" in (a.error_message or "") for a in attempts)

    done = app.get_job(beside.id)  # not isolated: it ran in the worker's own threads
    assert (done.state, done.result["pid"]) == ("succeeded", worker.pid)


def test_isolated_job_is_cancelled_by_killing_its_process(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    log, gate = str(tmp_path / "runs.log"), str(tmp_path / "never-opened")
    job = app.enqueue("stuck_sync", {"log": log, "gate": gate})
    worker = spawn("--pool", "process", "--heartbeat-seconds", "0.2", app=APP)
    wait_until(lambda: pool_app.executions(log), timeout=30, what="the job to start")
    (_, child_pid) = pool_app.executions(log)[0]
    assert child_pid != worker.pid

    app.cancel(job.id)  # a sync task in a thread could not be stopped; a process can
    wait_until(all_in(app, [job], "cancelled"), what="the cancel to be written")
    assert not pool_app._alive(child_pid)
    assert [a.outcome for a in app.attempts(job.id)] == ["cancelled"]
    assert worker.proc.poll() is None


def test_isolated_task_past_its_timeout_takes_its_thread_down_with_its_process(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    job = app.enqueue("overruns", {"log": log})  # isolated=True, timeout=0.3
    worker = spawn(app=APP)
    wait_until(all_in(app, [job], "dead_letter"), timeout=30, what="the timeout's outcome")

    assert app.get_job(job.id).last_error_code == "JobTimeout"
    ((_, child_pid),) = pool_app.executions(log)
    assert child_pid != worker.pid
    assert not pool_app._alive(child_pid)  # gone before its outcome was written
    assert worker.proc.poll() is None


def test_a_crash_is_a_retryable_failure_under_the_jobs_policy() -> None:
    crash = Crashed("the task's process (pid 7) exited with code 1")
    retry = outcome_to_change(attempt=1, max_attempts=3, policy=durq.Fixed([5]), outcome=crash)
    assert (retry.to_state, retry.attempt_outcome, retry.error_code, retry.delay) == (
        "retry_wait",
        "crashed",
        "crashed",
        5.0,
    )
    last = outcome_to_change(attempt=3, max_attempts=3, policy=durq.Fixed([5]), outcome=crash)
    assert (last.to_state, last.attempt_outcome, last.error_message) == (
        "dead_letter",
        "crashed",
        crash.message,
    )


def test_a_worker_built_in_python_finds_its_apps_import_path(
    make_app: Callable[..., durq.App],
) -> None:
    found = ImportPath.of(pool_app.app)
    assert found is not None and found.spec == "tests.worker.pool_app:app"
    assert found() is pool_app.app  # what a task process loads: the same App, by import

    with pytest.raises(durq.ConfigurationError, match="no module's attribute"):
        durq.Worker(make_app(), pool="process")  # built in a test: nowhere to import it from
