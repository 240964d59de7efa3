"""Prefetch: jobs claimed ahead of free slots wait in the worker's buffer under lease
(heartbeated), start as slots free, are released at shutdown without spending an attempt,
and can be cancelled before they start. The buffer's sizing is tests/unit/test_inflight.py;
here it is pinned to ``prefetch`` so the behaviour shows with a handful of jobs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durq
from durq._worker.inflight import InFlightJobs
from durq._worker.runner import Worker

from .support import all_in, wait_until


@pytest.fixture(autouse=True)
def whole_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(InFlightJobs, "buffer_size", lambda self: self.prefetch)


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    return tmp_path / "gate"


@pytest.fixture
def held(app: durq.App, gate: Path) -> tuple[durq.Job, list[durq.Job]]:
    """One job that blocks until the gate opens, then three that would finish at once."""
    blocker = app.enqueue("async_block", {"gate": str(gate)})
    waiting = [app.enqueue("ok", {"n": n}) for n in range(3)]
    return blocker, waiting


@pytest.fixture
def worker(app: durq.App, gate: Path) -> Iterator[Worker]:
    """One running slot and a buffer of three; stopped (gate opened) at the end."""
    w = Worker(
        app,
        concurrency=1,
        prefetch=3,
        lease_seconds=2,
        heartbeat_seconds=0.2,
        shutdown_timeout=20,
        maintenance=False,
    )
    thread = threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        yield w
    finally:
        gate.touch()
        w.request_stop()
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop within 30s"


def test_prefetched_jobs_wait_under_lease_and_start_as_slots_free(
    app: durq.App, worker: Worker, held: tuple[durq.Job, list[durq.Job]], gate: Path
) -> None:
    blocker, waiting = held
    wait_until(all_in(app, [blocker, *waiting], "running"), what="all four jobs claimed")
    assert worker.inflight.buffered() == 3
    for job in waiting:
        claimed = app.get_job(job.id)
        assert (claimed.worker_id, claimed.attempt) == (worker.worker_id, 1)

    # Their leases (2 s) are kept alive while they wait: heartbeats move them on.
    first = app.get_job(waiting[-1].id).lease_expires_at
    assert first is not None
    wait_until(
        lambda: (app.get_job(waiting[-1].id).lease_expires_at or first) > first,
        what="a heartbeat to extend a buffered job's lease",
    )
    assert app.get_job(waiting[-1].id).state == "running"

    gate.touch()
    wait_until(all_in(app, [blocker, *waiting], "succeeded"), what="every job to finish")
    for job in waiting:
        done = app.get_job(job.id)
        assert done.attempt == 1 and done.result["n"] == job.args["n"]
        assert [a.outcome for a in app.attempts(job.id)] == ["succeeded"]


def test_prefetched_jobs_are_released_at_shutdown_without_spending_an_attempt(
    app: durq.App, worker: Worker, held: tuple[durq.Job, list[durq.Job]], gate: Path
) -> None:
    blocker, waiting = held
    wait_until(all_in(app, [blocker, *waiting], "running"), what="all four jobs claimed")

    worker.request_stop()
    # Released at once, while the running job still has its slot.
    wait_until(all_in(app, waiting, "queued"), what="the buffered jobs to be released")
    assert app.get_job(blocker.id).state == "running"
    for job in waiting:
        back = app.get_job(job.id)
        assert (back.attempt, back.last_error_code) == (0, "released")
        assert back.lease_expires_at is None and back.result is None

    gate.touch()
    wait_until(worker.finished.is_set, what="the worker to stop")
    assert app.get_job(blocker.id).state == "succeeded"
    assert [str(app.get_job(j.id).state) for j in waiting] == ["queued"] * 3
    # A release is written but not a job processed: the worker row counts the blocker only.
    (row,) = [w for w in app.list_workers() if w.id == worker.worker_id]
    assert (row.status, row.processed) == ("stopped", 1)


def test_a_prefetched_job_cancelled_before_it_starts_never_runs(
    app: durq.App, worker: Worker, held: tuple[durq.Job, list[durq.Job]], gate: Path
) -> None:
    blocker, waiting = held
    wait_until(all_in(app, [blocker, *waiting], "running"), what="all four jobs claimed")

    app.cancel(waiting[0].id)
    wait_until(all_in(app, waiting[:1], "cancelled"), what="the buffered job to be cancelled")
    assert app.get_job(blocker.id).state == "running"
    assert app.get_job(waiting[0].id).result is None
    assert [a.outcome for a in app.attempts(waiting[0].id)] == ["cancelled"]

    gate.touch()
    wait_until(all_in(app, [blocker, *waiting[1:]], "succeeded"), what="the rest to finish")
    assert app.get_job(waiting[0].id).state == "cancelled"
