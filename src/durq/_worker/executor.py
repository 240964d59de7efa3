"""The executor: runs each claimed job as an asyncio task through the execution pipeline
and hands its fenced write to the completer; reacts to lost leases and cancels."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import Counter

from .. import _tracing, states
from .._drivers import FinishRequest
from .._engine import pipeline
from .._engine.policy import unwritable
from ..errors import LeaseLost
from ..types import Job
from .completer import Completer, Written
from .inflight import InFlight, InFlightJobs, Phase

__all__ = ["Executor"]

log = logging.getLogger("durq.worker")


class Executor:
    def __init__(
        self,
        runtime: pipeline.Runtime,
        *,
        worker_id: str,
        inflight: InFlightJobs,
        pool: concurrent.futures.Executor,
    ) -> None:
        self.runtime = runtime
        self.tasks = runtime.tasks
        self.worker_id = worker_id
        self.inflight = inflight
        self.pool = pool
        self.completer: Completer[InFlight, FinishRequest] | None = (
            None  # wired by the runner (it calls us back)
        )
        self.outcomes: Counter[str] = Counter()
        self.released = 0
        self.lost = 0

    def release_all(self) -> None:
        """Release every job still running; the completer writes each release."""
        leftovers = self.inflight.running()
        if leftovers:
            log.info(
                "shutdown timeout passed: releasing %d unfinished job(s) back to queued "
                "without spending their attempt",
                len(leftovers),
            )
        for entry in leftovers:
            self._release(entry)

    def start_job(self, job: Job, trace_context: str | None = None) -> None:
        entry = self.inflight.add(job)
        entry.trace_context = trace_context
        loop = asyncio.get_running_loop()
        entry.task = loop.create_task(self._execute(entry), name=f"durq-job-{job.id}")

    async def _execute(self, entry: InFlight) -> None:
        job = entry.job
        try:
            execution = await pipeline.run_async(
                self.runtime, job, self.worker_id, self.pool, entry.trace_context
            )
        except asyncio.CancelledError:
            if entry.phase is Phase.RUNNING and entry.cancel_requested:
                self._finish(entry, self._request(entry, states.cancel_running()))
            return  # released or abandoned: that path owns the job now
        except BaseException as exc:  # SystemExit and the like, raised by a task
            task = self.tasks.get(job.task)
            execution = pipeline.Execution(job, task, exc, entry.runtime_ms, None)
        if entry.phase is not Phase.RUNNING:
            return  # released or abandoned while it ran: its outcome is not ours to write
        try:
            req = pipeline.conclude(execution, self.worker_id)
        except Exception as exc:  # conclude() guards its rule; this is the last line
            log.exception(
                "job %s (%s): could not conclude its attempt",
                job.id,
                job.task,
                extra=self.log_fields(job),
            )
            req = self._request(entry, unwritable(f"{type(exc).__name__}: {exc}"))
        if req is None:  # the task itself hit LeaseLost through its context
            self._abandon(entry, "the task's own fenced write found the lease lost")
            return
        self._finish(entry, req)

    def _request(self, entry: InFlight, change: states.Change) -> FinishRequest:
        job = entry.job
        return FinishRequest.for_job(job, self.worker_id, change, entry.runtime_ms)

    def _finish(self, entry: InFlight, req: FinishRequest) -> None:
        self.inflight.set_phase(entry, Phase.FINISHING)
        entry.finishing_ns = _tracing.now_ns()
        assert self.completer is not None
        self.completer.submit(entry, req)

    def _release(self, entry: InFlight) -> None:
        self.inflight.set_phase(entry, Phase.RELEASING)
        if entry.task is not None:
            entry.task.cancel()  # an async task stops here; a sync thread runs on, ignored
        assert self.completer is not None
        self.completer.submit(entry, self._request(entry, states.release()))

    def _abandon(self, entry: InFlight, why: str) -> None:
        self.inflight.set_phase(entry, Phase.ABANDONED)
        self.lost += 1
        self.inflight.remove(entry)
        log.warning(
            "job %s (%s): lease lost (%s); abandoning it without writing anything. If this "
            "happens often, raise lease_seconds or heartbeat more often",
            entry.job.id,
            entry.job.task,
            why,
        )

    def on_written(self, entry: InFlight, req: FinishRequest, result: Written) -> None:
        self.inflight.remove(entry)
        job = entry.job
        if result is not None:
            state = "lease_lost" if isinstance(result, LeaseLost) else str(result.state)
            _tracing.finished(job, entry.trace_context, state, entry.finishing_ns)
        if isinstance(result, LeaseLost):
            self.lost += 1
            log.warning(
                "job %s (%s): lease lost before its outcome was written; another owner has "
                "it now, nothing was written",
                job.id,
                job.task,
                extra=self.log_fields(job),
            )
            return
        if result is None:
            return
        self.outcomes[str(result.state)] += 1
        ids = self.log_fields(job)
        if entry.phase is Phase.RELEASING:
            self.released += 1
            log.info(
                "job %s (%s): released to %s, attempt not spent",
                job.id,
                job.task,
                result.state,
                extra=ids,
            )
        elif result.state == "succeeded":
            # DEBUG: a line per job would cost more than a short job itself; the worker's
            # summary, metrics and the attempt records say what ran.
            log.debug(
                "job %s (%s) succeeded in %d ms",
                job.id,
                job.task,
                req.runtime_ms or 0,
                extra=ids | {"runtime_ms": req.runtime_ms},
            )
        else:
            # A retry is worth a look (WARNING); a job that will not run again is an ERROR,
            # with the traceback that explains it.
            final = result.state not in ("retry_wait", "queued")
            log.log(
                logging.ERROR if final else logging.WARNING,
                "job %s (%s) attempt %d/%d: %s: %s → %s%s",
                job.id,
                job.task,
                job.attempt,
                job.max_attempts,
                result.last_error_code,
                result.last_error,
                result.state,
                ""
                if final
                else f" (next attempt at {result.run_at.isoformat(timespec='seconds')})",
                extra=ids
                | {"error_code": result.last_error_code, "state": str(result.state)}
                | ({"traceback": req.traceback} if final and req.traceback else {}),
            )

    def log_fields(self, job: Job) -> dict[str, object]:
        """The ids every log line about ``job`` carries."""
        return {
            "job_id": job.id,
            "task": job.task,
            "queue": job.queue,
            "attempt": job.attempt,
            "worker_id": self.worker_id,
        }

    def on_lost(self, entry: InFlight) -> None:
        if entry.phase is not Phase.RUNNING:
            return  # a queued outcome or release decides for itself, fenced
        if entry.task is not None:
            entry.task.cancel()
        self._abandon(entry, "a heartbeat found another owner, or the job is no longer running")

    def on_cancel(self, entry: InFlight) -> None:
        if entry.phase is not Phase.RUNNING or entry.cancel_requested:
            return
        entry.cancel_requested = True
        task = self.tasks.get(entry.job.task)
        if task is not None and task.is_async and entry.task is not None:
            log.info("job %s (%s): cancel requested; stopping it", entry.job.id, entry.job.task)
            entry.task.cancel()
        else:
            log.info(
                "job %s (%s): cancel requested; a sync task cannot be interrupted, so it is "
                "cancelled when its function returns",
                entry.job.id,
                entry.job.task,
            )
