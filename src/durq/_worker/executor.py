"""Run one claimed job and turn what happened into a fenced ``FinishRequest``.

Async tasks run on the event loop; sync tasks run in the caller's thread (the worker runs
them in its thread pool). Neither a task's exception nor its bad result escapes: both
become outcomes that the retry rules handle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .. import states
from ..errors import LeaseLost
from ..retry import Fail, Retry, RetryPolicy, policy_from_dict
from ..states import Outcome, Success
from ..task import JobContext, Task, call_task
from ..types import Job

if TYPE_CHECKING:
    from ..app import App

from .._drivers.base import FinishRequest

__all__ = ["ExecutionResult", "execute_async", "execute_sync", "finish_request"]


class ExecutionResult:
    __slots__ = ("ctx", "job", "outcome", "runtime_ms", "task")

    def __init__(
        self,
        job: Job,
        task: Task[Any, Any] | None,
        outcome: Outcome,
        runtime_ms: int,
        ctx: JobContext | None,
    ) -> None:
        self.job = job
        self.task = task
        self.outcome = outcome
        self.runtime_ms = runtime_ms
        self.ctx = ctx


def _unknown(app: App, job: Job) -> Retry:
    return Retry(
        code="unknown_task",
        message=f"no task named {job.task!r} is registered in this worker's App; "
        f"known: {sorted(app.tasks)[:20]}. Deploy a worker that defines it",
    )


def _check_result(value: Any) -> Outcome:
    if value is None or type(value) in (int, bool):
        return Success(value)
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")  # an unpaired surrogate cannot be stored
    except (TypeError, ValueError) as exc:
        return Fail(
            "result_not_json",
            f"the task returned a {type(value).__name__}, which is not JSON-serialisable "
            f"({exc}); return plain JSON types (dict, list, str, int, float, bool, None)",
        )
    if "\\u0000" in text and _has_nul(value):
        return Fail(
            "result_not_json",
            "the task's result holds a NUL character (\\x00), which the database cannot "
            "store in JSON; encode binary data (e.g. base64) or drop the NUL",
        )
    return Success(value)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def execute_sync(app: App, job: Job, worker_id: str) -> ExecutionResult:
    """Run a job in this thread (an async task gets its own event loop)."""
    task = app.tasks.get(job.task)
    started = time.perf_counter()
    if task is None:
        return ExecutionResult(job, None, _unknown(app, job), 0, None)
    ctx = JobContext(app, task, job, worker_id)
    outcome: Outcome
    try:
        if task.is_async:
            value = asyncio.run(_bounded(task, call_task(task, ctx, job.args)))
        elif task.timeout is not None:
            value = _sync_with_timeout(task, ctx, job)
        else:
            value = call_task(task, ctx, job.args)
        outcome = _check_result(value)
    except LeaseLost as exc:
        outcome = exc
    except Exception as exc:
        outcome = exc
    runtime_ms = int((time.perf_counter() - started) * 1000)
    return ExecutionResult(job, task, outcome, runtime_ms, ctx)


async def execute_async(
    app: App, job: Job, worker_id: str, pool: concurrent.futures.Executor | None = None
) -> ExecutionResult:
    """Run a job from the worker's event loop: async on the loop, sync in ``pool``."""
    task = app.tasks.get(job.task)
    started = time.perf_counter()
    if task is None:
        return ExecutionResult(job, None, _unknown(app, job), 0, None)
    ctx = JobContext(app, task, job, worker_id)
    outcome: Outcome
    try:
        if task.is_async:
            value = await _bounded(task, call_task(task, ctx, job.args))
        else:
            loop = asyncio.get_running_loop()
            value = await _bounded(task, loop.run_in_executor(pool, call_task, task, ctx, job.args))
        outcome = _check_result(value)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        outcome = exc
    runtime_ms = int((time.perf_counter() - started) * 1000)
    return ExecutionResult(job, task, outcome, runtime_ms, ctx)


async def _bounded(task: Task[Any, Any], work: Awaitable[Any]) -> Any:
    """Await ``work`` for at most the task's timeout. Only running out of time is a
    ``JobTimeout``: a ``TimeoutError`` the task raises itself stays the task's own error."""
    if task.timeout is None:
        return await work
    future = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({future}, timeout=task.timeout)
    except asyncio.CancelledError:
        future.cancel()
        raise
    if not done:
        future.cancel()  # an async task stops; a thread cannot, and runs on unheeded
        raise _timeout(task)
    return future.result()


def _sync_with_timeout(task: Task[Any, Any], ctx: JobContext, job: Job) -> Any:
    # A thread cannot be killed: on timeout the attempt is recorded as failed and the
    # thread is left to finish on its own; its writes are fenced, so they change nothing.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        future = pool.submit(call_task, task, ctx, job.args)
        done, _ = concurrent.futures.wait([future], timeout=task.timeout)
        if not done:
            raise _timeout(task)
        return future.result()
    finally:
        pool.shutdown(wait=False)


class JobTimeout(Exception):
    pass


def _timeout(task: Task[Any, Any]) -> JobTimeout:
    return JobTimeout(f"task {task.name!r} ran longer than its timeout of {task.timeout}s")


def job_policy(job: Job, task: Task[Any, Any] | None) -> RetryPolicy:
    """The schedule stored on the job at enqueue wins; else the task's; else the default."""
    if job.retry_policy:
        return policy_from_dict(job.retry_policy)
    return task.retry if task else policy_from_dict(None)


def finish_request(result: ExecutionResult, worker_id: str) -> FinishRequest | None:
    """The fenced write for an execution, or None if the lease was lost (touch nothing)."""
    if isinstance(result.outcome, LeaseLost):
        return None
    job, task = result.job, result.task
    if (
        result.ctx is not None
        and result.ctx.cancel_requested
        and not isinstance(result.outcome, Success)
    ):
        change = states.cancel_running()
    else:
        change = states.outcome_to_change(
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            policy=job_policy(job, task),
            outcome=result.outcome,
            classifier=task.classifier if task else None,
        )
    artifacts = result.ctx.artifacts if result.ctx else []
    return FinishRequest(job.id, job.claim_version, worker_id, change, result.runtime_ms, artifacts)
