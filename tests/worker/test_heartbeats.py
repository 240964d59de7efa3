"""Heartbeats keep leases alive, carry an operator's cancel to a running job, and find out
when the lease was lost: then the worker abandons the job and writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import durq

from .support import running_worker, wait_until


def test_heartbeats_extend_the_lease_of_a_long_job(make_app: Callable[..., durq.App]) -> None:
    app = make_app()

    @app.task
    async def long_job(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    with running_worker(app, lease_seconds=0.6, heartbeat_seconds=0.15) as worker:
        job = long_job.enqueue(seconds=1.5)  # well past the lease: only heartbeats save it
        wait_until(lambda: app.get_job(job.id).state == "succeeded", what="the long job")
    after = app.get_job(job.id)
    assert (after.attempt, after.claim_version, after.result) == (1, 1, "done")
    assert worker.lost == 0


def test_an_operator_cancel_stops_a_running_async_job(make_app: Callable[..., durq.App]) -> None:
    app = make_app()
    started: list[int] = []

    @app.task(pass_context=True)
    async def endless(ctx: durq.JobContext) -> None:
        started.append(ctx.job.id)
        await asyncio.sleep(3600)

    with running_worker(app, heartbeat_seconds=0.1, lease_seconds=5):
        job = endless.enqueue()
        wait_until(lambda: job.id in started, what="the job to start")
        assert app.cancel(job.id).cancel_requested
        wait_until(lambda: app.get_job(job.id).state == "cancelled", what="the cancel")
    (attempt,) = app.attempts(job.id)
    assert attempt.outcome == "cancelled"


def test_a_lost_lease_is_abandoned_and_nothing_is_written(
    make_app: Callable[..., durq.App], tmp_path: Path
) -> None:
    app = make_app()
    gate = tmp_path / "gate"

    @app.task
    def slow() -> str:
        wait_until(gate.exists, timeout=30, what="the gate")
        return "stale result"

    with running_worker(app, heartbeat_seconds=0.1, lease_seconds=5) as worker:
        job = slow.enqueue()
        wait_until(lambda: app.get_job(job.id).state == "running", what="the job to run")
        _take_over(app, job.id)  # as after a reclaim and a new claim by another worker
        wait_until(lambda: worker.lost == 1, what="a heartbeat to find the lease lost")
        gate.touch()  # the stale task now finishes; its result must go nowhere
        wait_until(lambda: len(worker.inflight) == 0, what="the worker to let go")
    after = app.get_job(job.id)
    assert (after.state, after.worker_id, after.result) == ("running", "new-owner", None)
    assert app.attempts(job.id) == []


def _take_over(app: durq.App, job_id: int) -> None:
    """What a reclaim plus another worker's claim leave behind: a newer claim_version."""
    sql = (
        "UPDATE durq_jobs SET claim_version = claim_version + 2, worker_id = 'new-owner' "
        "WHERE id = {}"
    )
    with app.driver.transaction() as ex:
        conn = ex.conn  # type: ignore[attr-defined]
        placeholder = "?" if ex.dialect == "sqlite" else "%s"
        conn.execute(sql.format(placeholder), (job_id,))
