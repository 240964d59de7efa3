"""``--processes P``: one supervisor, P worker processes, one SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

import durq
from durq.types import WorkerInfo

from .support import WorkerProcess, all_in, wait_until

pytestmark = pytest.mark.slow


def test_processes_run_under_one_supervisor_and_stop_together(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    supervisor = spawn("--processes", "2", "--concurrency", "2", "--poll-interval", "0.2")

    def children() -> list[WorkerInfo]:
        return [w for w in app.list_workers() if w.alive and w.pid != supervisor.pid]

    wait_until(lambda: len(children()) == 2, what="two worker processes to register")
    pids = {w.pid for w in children()}
    assert len(pids) == 2 and supervisor.pid not in pids

    jobs = [app.enqueue("sleep_for", {"seconds": 0.05}) for _ in range(12)]
    wait_until(all_in(app, jobs, "succeeded"), what="the pool to run every job")
    ran_in = {app.get_job(j.id).result["pid"] for j in jobs}
    assert ran_in <= pids

    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait_exit() == 0
    stopped = {w.pid: w.status for w in app.list_workers()}
    assert all(stopped[pid] == "stopped" for pid in pids)
    for pid in pids:  # the children are gone too, not orphaned
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_crashed_child_is_restarted(app: durq.App, spawn: Callable[..., WorkerProcess]) -> None:
    supervisor = spawn("--processes", "2", "--poll-interval", "0.2")

    def children() -> set[int]:
        return {w.pid for w in app.list_workers() if w.alive and w.pid != supervisor.pid}

    wait_until(lambda: len(children()) == 2, what="the children to register")
    first = children()
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    wait_until(
        lambda: len(children() - first) == 1,
        what="the supervisor to start a new child in place of the killed one",
    )
    assert "restarting it" in supervisor.log()
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait_exit() == 0
