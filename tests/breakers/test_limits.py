"""Per-key concurrency and rate limits hold across 4 racing worker processes, on both
backends: no budget is spent twice, and a limited key never blocks jobs without one."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durq
from durq import Limit

from ..waiting import wait_until
from ..worker.support import WorkerProcess, worker_processes

APP = "tests.breakers.apps:app"
pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(db_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    with worker_processes(db_url, tmp_path) as start:
        yield start


def _run_four(app: durq.App, spawn: Callable[..., WorkerProcess], jobs: list[durq.Job]) -> None:
    # The queue stays paused until all four workers are up, so they race from the start
    # (otherwise the first one up may run everything before the others arrive).
    app.pause_queue("limited")
    procs = [
        spawn(
            "--queues",
            "limited",
            "--concurrency",
            "4",
            "--poll-interval",
            "0.1",
            app=APP,
            name=f"w{i}",
        )
        for i in range(4)
    ]
    for proc in procs:
        proc.wait_ready(app)
    app.resume_queue("limited")

    def done() -> bool:
        return all(app.get_job(j.id).state == "succeeded" for j in jobs)

    wait_until(done, timeout=90, what="every limited job to succeed", interval=0.1)


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def test_concurrency_limit_never_exceeded_across_processes(
    make_app: Callable[..., durq.App], spawn: Callable[..., WorkerProcess]
) -> None:
    app = make_app()
    app.limits["tenant-*"] = Limit(concurrency=2)
    keyed = {
        key: [
            app.enqueue("limited", {"seconds": 0.05}, queue="limited", concurrency_key=key)
            for _ in range(12)
        ]
        for key in ("tenant-a", "tenant-b")
    }
    free = [app.enqueue("limited", {"seconds": 0.05}, queue="limited") for _ in range(12)]
    _run_four(app, spawn, [j for js in keyed.values() for j in js] + free)
    for key, jobs in keyed.items():
        spans = [(r["started"], r["ended"]) for r in (app.get_job(j.id).result for j in jobs)]
        assert _max_overlap(spans) <= 2, f"{key} ran more than 2 at once"
        assert len({app.get_job(j.id).result["pid"] for j in jobs}) > 1, "the test must race"
    assert all(limit.running == 0 for limit in app.list_limits()), "every slot was freed"
    # The unlimited jobs ran alongside, more than 2 at a time: nothing held them back.
    spans = [(r["started"], r["ended"]) for r in (app.get_job(j.id).result for j in free)]
    assert _max_overlap(spans) > 2


def test_rate_limit_never_overspent_across_processes(
    make_app: Callable[..., durq.App], spawn: Callable[..., WorkerProcess]
) -> None:
    app = make_app()
    per, rate = 0.5, 3
    app.limits["api-quota"] = Limit(rate=rate, per=per)
    jobs = [
        app.enqueue("limited", {"seconds": 0.0}, queue="limited", concurrency_key="api-quota")
        for _ in range(18)
    ]
    _run_four(app, spawn, jobs)
    starts: dict[int, int] = {}
    for job in jobs:
        (attempt,) = app.attempts(job.id)
        assert attempt.started_at is not None
        window = math.floor(attempt.started_at.timestamp() / per)
        starts[window] = starts.get(window, 0) + 1
    assert max(starts.values()) <= rate, f"more than {rate} starts in a window: {starts}"
    assert len(starts) >= 18 // rate, "the jobs were spread over windows"
