"""``--once``, ``--max-jobs`` and ``--poll-interval`` behave exactly as documented."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

import durq

from .support import WorkerProcess, running_worker, wait_until

pytestmark = pytest.mark.slow


def test_once_processes_exactly_one_job_then_exits_0(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    jobs = [app.enqueue("ok", {"n": n}) for n in range(3)]
    worker = spawn("--once", "--concurrency", "10")
    assert worker.wait_exit() == 0
    assert [str(app.get_job(j.id).state) for j in jobs] == ["succeeded", "queued", "queued"]
    assert [app.get_job(j.id).attempt for j in jobs] == [1, 0, 0]


def test_once_with_nothing_ready_exits_0_at_once(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    later = app.enqueue("ok", {"n": 1}, delay=3600)
    worker = spawn("--once")
    assert worker.wait_exit() == 0
    assert app.get_job(later.id).state == "queued"
    assert "1 succeeded" not in worker.log() and "stopped (no jobs)" in worker.log()


def test_max_jobs_claims_no_more_than_n_and_exits_after_n(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    jobs = [app.enqueue("ok", {"n": n}) for n in range(5)]
    worker = spawn("--max-jobs", "2", "--concurrency", "10")
    assert worker.wait_exit() == 0
    assert [str(app.get_job(j.id).state) for j in jobs] == ["succeeded"] * 2 + ["queued"] * 3
    assert [app.get_job(j.id).attempt for j in jobs[2:]] == [0, 0, 0]  # never claimed


def test_max_jobs_waits_for_work_until_n_jobs_are_done(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn("--max-jobs", "2", "--poll-interval", "0.2")
    worker.wait_ready(app)
    first = app.enqueue("ok", {"n": 1})
    wait_until(lambda: app.get_job(first.id).state == "succeeded", what="the first job")
    assert worker.proc.poll() is None  # one of two: still working
    second = app.enqueue("ok", {"n": 2})
    assert worker.wait_exit() == 0
    assert app.get_job(second.id).state == "succeeded"


def test_poll_interval_zero_is_clamped_to_a_tenth_of_a_second(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn("--poll-interval", "0", "--once")
    assert worker.wait_exit() == 0
    assert "poll_interval=0.1s" in worker.log()

    # And it really polls at that rate: never faster (no spinning), never at the default 1 s.
    with running_worker(app, poll_interval=0, listen_notify=False) as running:
        assert running.settings.poll_interval == 0.1
        producer = running.producer
        assert producer is not None
        wait_until(lambda: producer.wakeups["poll"] >= 6, what="six poll ticks")
        ticks = [at for reason, at in producer.wake_log if reason == "poll"]
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert min(gaps) >= 0.095, gaps
    assert sorted(gaps)[len(gaps) // 2] < 0.5, gaps
