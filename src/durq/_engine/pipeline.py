"""The execution pipeline: run one claimed job, then turn what happened into its fenced
write. One pipeline for every caller (Oban's ``Executor.call``): the worker, ``App.run_job``
and ``App.work`` (and through them the testing helpers).

1. *run*: the task is looked up in the registry and called with a :class:`JobContext`;
   async tasks run on the event loop, sync tasks in a thread (the worker's pool) or, in
   :func:`run_sync`, the caller's own thread;
2. *classify*: whatever happened (a value, an exception, a signal, a bad result) becomes
   an outcome; nothing a task does escapes;
3. *conclude*: :func:`conclude` turns the outcome into the next state and its write
   request inside one guard (``durq._engine.policy``): it never raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import json
import time
import traceback
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _tracing, states
from .._drivers import Driver, FinishRequest
from ..errors import LeaseLost, ValidationError
from ..retry import Fail, Retry
from ..states import Outcome, Success, storable
from ..task import JobContext, Task, call_task
from ..types import Job
from .policy import next_change
from .refresh import refresh, refresh_signal
from .secrets import Keyring
from .signing import Signer
from .validate import DEFAULT_MAX_ARGS_BYTES, DEFAULT_MAX_JSON_DEPTH, check_json_shape

__all__ = ["Execution", "Runtime", "conclude", "format_traceback", "run_async", "run_sync"]


@dataclass(frozen=True)
class Runtime:
    """What running a job needs: the database, the tasks this process knows, the lease."""

    driver: Driver
    tasks: Mapping[str, Task[Any, Any]]
    lease_seconds: float
    #: Opens ``ctx.secrets`` (None: jobs here carry none).
    keyring: Keyring | None = None
    #: Signs credential-refresh calls (None: refresh calls go unsigned).
    signer: Signer | None = None
    refresh_timeout: float = 10.0
    #: DURQ_MAX_RESULT_BYTES and DURQ_MAX_JSON_DEPTH: a larger or deeper result fails.
    max_result_bytes: int = DEFAULT_MAX_ARGS_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH


@dataclass(slots=True)
class Execution:
    """What running one claimed job produced."""

    job: Job
    task: Task[Any, Any] | None
    outcome: Outcome
    runtime_ms: int
    ctx: JobContext | None


def _prepare(
    runtime: Runtime, job: Job, worker_id: str
) -> tuple[Task[Any, Any], JobContext] | Execution:
    """The task and its context; an unknown task is already an outcome (retried, so a
    worker that defines it can take the job)."""
    task = runtime.tasks.get(job.task)
    if task is None:
        signal = Retry(
            code="unknown_task",
            message=f"no task named {job.task!r} is registered in this worker's App; "
            f"known: {sorted(runtime.tasks)[:20]}. Deploy a worker that defines it",
        )
        return Execution(job, None, signal, 0, None)
    ctx = JobContext(
        runtime.driver, task, job, worker_id, runtime.lease_seconds, keyring=runtime.keyring
    )
    return task, ctx


def _check_result(value: Any, runtime: Runtime) -> Outcome:
    if value is None or type(value) is bool or (type(value) is int and abs(value) < 2**63):
        return Success(value)
    try:
        check_json_shape(value, what="the result", max_depth=runtime.max_json_depth)
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        size = len(text.encode("utf-8"))  # an unpaired surrogate cannot be stored
    except ValidationError as exc:
        return Fail("result_not_json", f"the task's result was refused: {exc}")
    except (TypeError, ValueError) as exc:
        return Fail(
            "result_not_json",
            f"the task returned a {type(value).__name__}, which is not JSON-serialisable "
            f"({exc}); return plain JSON types (dict, list, str, int, float, bool, None)",
        )
    if size > runtime.max_result_bytes:
        return Fail(
            "result_too_large",
            f"the task's result is {size} bytes of JSON, over the limit of "
            f"{runtime.max_result_bytes} (DURQ_MAX_RESULT_BYTES); store large outputs "
            "elsewhere (e.g. an artifact with a reference) and return the reference",
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


def run_sync(
    runtime: Runtime, job: Job, worker_id: str, trace_context: str | None = None
) -> Execution:
    """Run a job in this thread (an async task gets an event loop of its own), inside its
    execute span when tracing is on (``trace_context``: its enqueue span's)."""
    if not _tracing.active():
        return _run_sync(runtime, job, worker_id)
    with _tracing.executing(job, trace_context) as traced:
        execution = _run_sync(runtime, job, worker_id)
        traced.outcome(execution.outcome)
    return execution


def _run_sync(runtime: Runtime, job: Job, worker_id: str) -> Execution:
    prepared = _prepare(runtime, job, worker_id)
    if isinstance(prepared, Execution):
        return prepared
    task, ctx = prepared
    started = time.perf_counter()
    outcome: Outcome
    try:
        if task.is_async:
            value = asyncio.run(_bounded(task, call_task(task, ctx, job.args)))
        elif task.timeout is not None:
            value = _sync_with_timeout(task, ctx, job)
        else:
            value = call_task(task, ctx, job.args)
        outcome = _check_result(value, runtime)
    except Exception as exc:  # LeaseLost included: conclude() abandons the job for it
        outcome = exc
    execution = Execution(job, task, outcome, _ms_since(started), ctx)
    signal = refresh_signal(task, outcome)
    return execution if signal is None else _refreshed(runtime, execution, signal)


async def run_async(
    runtime: Runtime,
    job: Job,
    worker_id: str,
    pool: concurrent.futures.Executor | None = None,
    trace_context: str | None = None,
) -> Execution:
    """Run a job from the worker's event loop: async on the loop, sync in ``pool``; inside
    its execute span when tracing is on (``trace_context``: its enqueue span's).

    Cancellation (shutdown, an operator's cancel) propagates to the caller."""
    if not _tracing.active():
        return await _run_async(runtime, job, worker_id, pool, False)
    with _tracing.executing(job, trace_context) as traced:
        execution = await _run_async(runtime, job, worker_id, pool, traced.span is not None)
        traced.outcome(execution.outcome)
    return execution


async def _run_async(
    runtime: Runtime,
    job: Job,
    worker_id: str,
    pool: concurrent.futures.Executor | None,
    traced: bool,
) -> Execution:
    prepared = _prepare(runtime, job, worker_id)
    if isinstance(prepared, Execution):
        return prepared
    task, ctx = prepared
    started = time.perf_counter()
    outcome: Outcome
    try:
        if task.is_async:
            value = await _bounded(task, call_task(task, ctx, job.args))
        else:
            loop = asyncio.get_running_loop()
            call: tuple[Any, ...] = (call_task, task, ctx, job.args)
            if traced:  # the task's own spans nest under its execute span
                call = (contextvars.copy_context().run, *call)
            value = await _bounded(task, loop.run_in_executor(pool, *call))
        outcome = _check_result(value, runtime)
    except Exception as exc:
        outcome = exc
    execution = Execution(job, task, outcome, _ms_since(started), ctx)
    signal = refresh_signal(task, outcome)
    if signal is None:  # every outcome but a refused credential: one isinstance check
        return execution
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool, _refreshed, runtime, execution, signal)


def _refreshed(runtime: Runtime, execution: Execution, signal: Any) -> Execution:
    """The execution with its outcome replaced by what the credential refresh decided."""
    signer = runtime.signer or Signer({})
    execution.outcome = refresh(
        runtime.driver,
        signer,
        execution.job,
        execution.ctx,
        signal,
        timeout=runtime.refresh_timeout,
    )
    return execution


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


async def _bounded(task: Task[Any, Any], work: Awaitable[Any]) -> Any:
    """Await ``work`` for at most the task's timeout. Only running out of time is a
    ``JobTimeout``: a ``TimeoutError`` the task raises itself stays the task's own error."""
    if task.timeout is None:
        return await work
    future = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({future}, timeout=task.timeout)
    except asyncio.CancelledError:
        await _stopped(future)
        if future.cancelled():
            raise
        return future.result()  # it ignored the cancel and finished: that is its outcome
    if not done:
        await _stopped(future)  # a thread cannot be stopped, and runs on unheeded
        raise _timeout(task)
    return future.result()


async def _stopped(future: asyncio.Future[Any]) -> None:
    """Cancel ``future`` and wait until its code really stopped: an async task that
    swallows the cancel keeps its job (and lease) until it returns."""
    future.cancel()
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({future})


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


def conclude(execution: Execution, worker_id: str) -> FinishRequest | None:
    """The fenced write for an execution, or None if the lease was lost (touch nothing).

    Never raises: a rule that fails dead-letters the job as ``outcome_unwritable``.
    """
    if isinstance(execution.outcome, LeaseLost):
        return None
    job, task, ctx = execution.job, execution.task, execution.ctx
    if ctx is not None and ctx.cancel_requested and not isinstance(execution.outcome, Success):
        change = states.cancel_running()
    else:
        change = next_change(job, execution.outcome, task.classifier if task else None)
    artifacts = ctx.artifacts if ctx else []
    report = ctx.run_report if ctx else None
    return FinishRequest.for_job(
        job,
        worker_id,
        change,
        execution.runtime_ms,
        artifacts,
        report,
        traceback=format_traceback(execution.outcome),
    )


#: At most this much of a traceback is stored with its attempt.
MAX_TRACEBACK = 16 * 1024


def format_traceback(outcome: Outcome) -> str | None:
    """The formatted traceback of a task's exception, bounded (its end, where the error
    was raised, is kept), or None for an outcome that is not an exception of the task's."""
    if not isinstance(outcome, BaseException) or outcome.__traceback__ is None:
        return None
    text = "".join(traceback.format_exception(outcome))
    if len(text) > MAX_TRACEBACK:
        text = "… (earlier frames cut)\n" + text[-(MAX_TRACEBACK - 32) :]
    return storable(text)
