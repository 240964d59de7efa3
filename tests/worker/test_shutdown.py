"""SIGTERM: running jobs finish, or are released without spending an attempt when the
shutdown timeout passes; nothing is left running; exit 0. A second signal exits at once."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

import durq

from .support import WorkerProcess, all_in, wait_until

pytestmark = pytest.mark.slow


def test_sigterm_lets_running_jobs_finish_then_exits_0(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    jobs = [app.enqueue("sleep_for", {"seconds": 0.6}) for _ in range(3)]
    worker = spawn("--concurrency", "3", "--shutdown-timeout", "20")
    wait_until(all_in(app, jobs, "running"), what="all three jobs to run")
    later = app.enqueue("ok", {"n": 1})

    worker.signal(signal.SIGTERM)
    assert worker.wait_exit() == 0

    assert [str(app.get_job(j.id).state) for j in jobs] == ["succeeded"] * 3
    assert app.get_job(later.id).state == "queued"  # stopped claiming at the signal
    assert app.list_jobs(state="running") == []
    (row,) = [w for w in app.list_workers() if w.id == worker.worker_id]
    assert row.status == "stopped" and row.processed == 3
    assert "shutting down gracefully" in worker.log()


def test_sigterm_releases_unfinished_jobs_without_spending_an_attempt(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # Async tasks stop when cancelled; a sync task cannot be stopped and keeps its lease
    # until it returns (tests/worker/test_unstoppable_tasks.py).
    gate = str(tmp_path / "never-opened")
    held = [app.enqueue("async_block", {"gate": gate}) for _ in range(2)]
    worker = spawn("--concurrency", "2", "--shutdown-timeout", "0.5")
    wait_until(all_in(app, held, "running"), what="both jobs to run")

    worker.signal(signal.SIGTERM)
    assert worker.wait_exit() == 0

    for job in held:
        after = app.get_job(job.id)
        assert (after.state, after.attempt, after.last_error_code) == ("queued", 0, "released")
        assert after.lease_expires_at is None
        ((number, outcome, who),) = [
            (a.attempt, a.outcome, a.worker_id) for a in app.attempts(job.id)
        ]
        assert (number, outcome, who) == (1, "released", worker.worker_id)
    assert app.list_jobs(state="running") == []
    assert "releasing 2 unfinished job(s)" in worker.log()

    # Released jobs are ready at once, and the next worker runs them with attempt 1.
    Path(gate).touch()
    second = spawn("--max-jobs", "2")
    assert second.wait_exit() == 0
    assert [(app.get_job(j.id).state, app.get_job(j.id).attempt) for j in held] == [
        ("succeeded", 1),
        ("succeeded", 1),
    ]


def test_second_signal_exits_at_once_and_leaves_leases_to_expire(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    job = app.enqueue("block", {"gate": str(tmp_path / "never-opened")})
    worker = spawn("--shutdown-timeout", "60", "--lease-seconds", "30")
    wait_until(all_in(app, [job], "running"), what="the job to run")

    worker.signal(signal.SIGINT)
    wait_until(lambda: "shutting down gracefully" in worker.log(), what="the first signal")
    worker.signal(signal.SIGINT)
    assert worker.wait_exit(timeout=10) == 1

    after = app.get_job(job.id)  # untouched: its lease expires and a reclaimer takes it
    assert (after.state, after.worker_id, after.attempt) == ("running", worker.worker_id, 1)
    assert "exiting now" in worker.log()
