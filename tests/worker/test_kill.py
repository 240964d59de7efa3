"""SIGKILL a worker mid-job: another worker reclaims its jobs after the lease expires and
completes them; the killed attempt is recorded as lost; no job succeeds twice."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

import durq

from .support import WorkerProcess, all_in, wait_until

pytestmark = pytest.mark.slow

FAST_LEASE = ("--lease-seconds", "1", "--heartbeat-seconds", "0.25", "--poll-interval", "0.2")


def test_killed_workers_jobs_are_reclaimed_and_completed_once(
    app: durq.App, spawn: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    jobs = [app.enqueue("block", {"gate": str(gate)}) for _ in range(3)]

    victim = spawn("--concurrency", "4", *FAST_LEASE, name="victim")
    wait_until(
        lambda: (
            all(app.get_job(j.id).worker_id == victim.worker_id for j in jobs)
            and all_in(app, jobs, "running")()
        ),
        what="the victim to hold all three jobs",
    )
    rescuer = spawn("--concurrency", "4", *FAST_LEASE, name="rescuer")
    rescuer.wait_ready(app)

    victim.signal(signal.SIGKILL)
    assert victim.wait_exit() == -signal.SIGKILL
    gate.touch()  # from now on the jobs finish as soon as they run

    wait_until(all_in(app, jobs, "succeeded"), what="the rescuer to complete every job")
    for job in jobs:
        done = app.get_job(job.id)
        assert done.result == {"pid": rescuer.pid, "gate_opened": True}
        assert (done.attempt, done.claim_version) == (2, 3)  # claim, reclaim, claim
        attempts = [(a.attempt, a.worker_id, a.outcome) for a in app.attempts(job.id)]
        assert attempts == [
            (1, victim.worker_id, "lost"),
            (2, rescuer.worker_id, "succeeded"),
        ]
    assert "lease of worker victim" in rescuer.log()

    workers = {w.id: w for w in app.list_workers()}
    assert workers[rescuer.worker_id].status == "alive"
    wait_until(
        lambda: {w.id: w for w in app.list_workers()}[victim.worker_id].status == "dead",
        what="the killed worker to show as dead",
    )
    rescuer.signal(signal.SIGTERM)
    assert rescuer.wait_exit() == 0
