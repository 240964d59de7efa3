"""Each job runs in a task of its own from its first step, however it is started (eagerly
on Python 3.12+, scheduled on 3.11): ``asyncio.current_task()`` is the job's, and an
``asyncio.timeout()`` entered before the job's first await cancels that job alone."""

from __future__ import annotations

import asyncio
import sys

import durq
from durq._worker import executor

from .support import all_in, running_worker, wait_until


def test_eager_start_is_used_exactly_where_python_has_it() -> None:
    assert executor.EAGER is (sys.version_info >= (3, 12))


def test_a_job_sees_its_own_task_from_its_first_step(app: durq.App) -> None:
    @app.task(name="whoami")
    async def whoami() -> str:
        task = asyncio.current_task()  # before any await: the job's first step
        assert task is not None
        return task.get_name()

    jobs = [app.enqueue("whoami", {}) for _ in range(5)]
    with running_worker(app, concurrency=5, maintenance=False):
        wait_until(all_in(app, jobs, "succeeded"), what="the jobs to finish")
    assert [app.get_job(j.id).result for j in jobs] == [f"durq-job-{j.id}" for j in jobs]


def test_a_timeout_entered_before_the_first_await_cancels_only_its_job(app: durq.App) -> None:
    @app.task(name="times_out", max_attempts=1)
    async def times_out() -> None:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(30)

    @app.task(name="sleeps_briefly")
    async def sleeps_briefly() -> str:
        await asyncio.sleep(0.2)  # still running when its neighbour's timeout fires
        return "done"

    late = app.enqueue("times_out", {})
    fine = [app.enqueue("sleeps_briefly", {}) for _ in range(3)]
    with running_worker(app, concurrency=4, maintenance=False) as worker:
        wait_until(all_in(app, [late, *fine], "succeeded", "dead_letter"), what="all to end")
        assert worker.lost == 0
    failed = app.get_job(late.id)
    assert (failed.state, failed.last_error_code) == ("dead_letter", "TimeoutError")
    assert [app.get_job(j.id).result for j in fine] == ["done"] * 3


def test_many_jobs_that_never_wait_all_finish_in_one_slot(app: durq.App) -> None:
    # An eagerly started job finishes inside its own start and frees the slot for the
    # next: the executor refills it in a loop, where a nested refill per job would grow
    # the stack with every job waiting in the buffer.
    count = 300

    @app.task(name="instant")
    async def instant(n: int) -> int:
        return n

    jobs = app.enqueue_many([("instant", {"n": n}) for n in range(count)])
    with running_worker(app, concurrency=1, prefetch=100, maintenance=False):
        wait_until(all_in(app, jobs, "succeeded"), what="every job to finish", timeout=60)
    assert [app.get_job(j.id).result for j in jobs[:3]] == [0, 1, 2]
