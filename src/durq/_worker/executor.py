"""The executor: runs each claimed job as an asyncio task through the execution pipeline
(or in a task process, :mod:`.processes`) and hands its fenced write to the completer;
reacts to lost leases and cancels.

A job is released only once its code has stopped: shutdown cancels an async task and
releases it when the cancel lands; a task that ignores the cancel, or a sync task in a
thread (which cannot be interrupted), keeps its lease until it returns, and its real
outcome is written; a job in a task process is stopped by killing its process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
from collections import Counter
from collections.abc import Mapping, Sequence

from .. import _tracing, states
from .._drivers import FinishRequest
from .._engine import pipeline
from .._engine.policy import next_change, unwritable
from ..errors import LeaseLost
from ..types import Job
from .completer import Completer, Written
from .inflight import InFlight, InFlightJobs, Phase
from .processes import TaskProcesses

__all__ = ["Executor"]

log = logging.getLogger("durq.worker")

#: Start each job's task eagerly (Python 3.12+): its first step runs at once, in its own
#: task, and a job that never waits is done before it reaches the loop's ready queue.
#: Python 3.11 has no eager start; there every job's task is scheduled as usual.
EAGER = sys.version_info >= (3, 12)


class Executor:
    def __init__(
        self,
        runtime: pipeline.Runtime,
        *,
        worker_id: str,
        inflight: InFlightJobs,
        pool: concurrent.futures.Executor,
        processes: TaskProcesses | None = None,
    ) -> None:
        self.runtime = runtime
        self.tasks = runtime.tasks
        self.worker_id = worker_id
        self.inflight = inflight
        self.pool = pool
        #: Task processes, for ``--pool process`` or tasks registered ``isolated=True``.
        self.processes = processes
        self.completer: Completer[InFlight, FinishRequest] | None = (
            None  # wired by the runner (it calls us back)
        )
        self.outcomes: Counter[str] = Counter()
        self.released = 0
        self.lost = 0
        #: False once shutdown began: buffered jobs are released, not started.
        self.accepting = True
        self._filling = False

    def release_all(self) -> None:
        """Stop every job still running and release each once its code has stopped (the
        completer writes each release); a job whose code cannot be stopped keeps its
        lease until it returns."""
        leftovers = [e for e in self.inflight.running() if not e.stopping]
        if leftovers:
            log.info(
                "shutdown timeout passed: releasing %d unfinished job(s) back to queued "
                "without spending their attempt, each once its code has stopped",
                len(leftovers),
            )
        for entry in leftovers:
            entry.stopping = True
            job = entry.job
            task = self.tasks.get(job.task)
            if self._isolated(entry):
                self.processes.kill(job.id)  # type: ignore[union-attr]
            elif task is not None and task.is_async and entry.task is not None:
                entry.task.cancel()  # released when the cancel lands (_execute)
            elif entry.task is not None:
                log.warning(
                    "job %s (%s): a sync task cannot be interrupted; it keeps its lease "
                    "until its function returns, and that outcome is written",
                    job.id,
                    job.task,
                    extra=self.log_fields(job),
                )
            else:
                self._release(entry)

    def leave_running(self) -> int:
        """The hard shutdown deadline passed: give up on the jobs whose code still runs,
        writing nothing (their leases are heartbeated until the process exits, then
        expire, and the reclaimer takes them). Returns how many."""
        stuck = self.inflight.running()
        for entry in stuck:
            self.inflight.set_phase(entry, Phase.ABANDONED)
            log.error(
                "job %s (%s): its code is still running past the hard shutdown deadline; "
                "exiting without releasing it, so no other worker runs it meanwhile. Its "
                "lease expires and the reclaimer retries it",
                entry.job.id,
                entry.job.task,
                extra=self.log_fields(entry.job),
            )
        return len(stuck)

    def accept(self, jobs: Sequence[Job], traces: Mapping[int, str]) -> None:
        """Take a claimed batch: start as many as there are idle slots, buffer the rest
        (prefetch); each buffered job starts the moment a running one finishes. A batch
        whose claim returns after shutdown began is released at once."""
        self.inflight.buffer(jobs)
        if traces:
            for entry in self.inflight.entries():
                if entry.phase is Phase.BUFFERED and entry.job.id in traces:
                    entry.trace_context = traces[entry.job.id]
        self.inflight.changed.fire()
        if self.accepting:
            self._fill()
        else:
            self._release_waiting()

    def stop_starting(self) -> None:
        """Shutdown: start nothing more, and release the jobs still waiting in the buffer
        (they never ran: back to queued, attempt not spent, for any worker to take)."""
        self.accepting = False
        self.inflight.close()
        self._release_waiting()

    def _release_waiting(self) -> None:
        waiting = self.inflight.unbuffer()
        if waiting:
            log.info(
                "releasing %d prefetched job(s) that had not started back to queued",
                len(waiting),
            )
        for entry in waiting:
            self._release(entry)

    def _fill(self) -> None:
        """Start buffered jobs into the idle running slots. Not re-entered: an eager job
        that finishes at once frees its slot inside ``_spawn``, and this loop refills it
        (a nested call would grow the stack by a job per slot)."""
        if self._filling or not self.accepting:
            return
        self._filling = True
        try:
            while self.inflight.idle_slots:
                entry = self.inflight.take()
                if entry is None:
                    return
                self._spawn(entry)
        finally:
            self._filling = False

    def _spawn(self, entry: InFlight) -> None:
        loop = asyncio.get_running_loop()
        coro = self._execute(entry)
        if EAGER:
            # The job's first step runs now, inside its own task (current_task() and
            # asyncio.timeout() see it): a job that finishes without waiting on anything
            # never goes through the loop's ready queue.
            entry.task = asyncio.Task(coro, loop=loop, name=_name(entry), eager_start=True)  # type: ignore[call-arg,unused-ignore]
        else:
            entry.task = loop.create_task(coro, name=_name(entry))

    def _isolated(self, entry: InFlight) -> bool:
        return self.processes is not None and self.processes.takes(entry.job.task)

    async def _execute(self, entry: InFlight) -> None:
        job = entry.job
        if self.processes is not None and self.processes.takes(job.task):
            await self._execute_in_process(entry)
            return
        try:
            execution = await pipeline.run_async(
                self.runtime, job, self.worker_id, self.pool, entry.trace_context
            )
        except asyncio.CancelledError:
            if entry.phase is Phase.RUNNING and entry.cancel_requested:
                self._finish(entry, self._request(entry, states.cancel_running()))
            elif entry.phase is Phase.RUNNING and entry.stopping:
                self._release(entry)  # the cancel landed: its code has stopped
            return  # abandoned: that path owns the job now
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

    async def _execute_in_process(self, entry: InFlight) -> None:
        """Run the job in a task process: it concludes there; a crash is its outcome."""
        assert self.processes is not None
        job = entry.job
        reply = await self.processes.run(job, entry.trace_context)
        if entry.phase is not Phase.RUNNING:
            return  # abandoned while it ran (its process was killed)
        if reply is None:  # the task itself hit LeaseLost through its context
            self._abandon(entry, "the task's own fenced write found the lease lost")
            return
        if not isinstance(reply, states.Crashed):
            self._finish(entry, reply)
        elif entry.cancel_requested:
            self._finish(entry, self._request(entry, states.cancel_running()))
        elif entry.stopping:
            self._release(entry)  # killed by shutdown: its code has stopped
        else:  # logged with its outcome, like any failure
            self._finish(entry, self._request(entry, next_change(job, reply)))

    def _request(self, entry: InFlight, change: states.Change) -> FinishRequest:
        job = entry.job
        return FinishRequest.for_job(job, self.worker_id, change, entry.runtime_ms)

    def _finish(self, entry: InFlight, req: FinishRequest) -> None:
        self.inflight.set_phase(entry, Phase.FINISHING)
        entry.finishing_ns = _tracing.now_ns()
        assert self.completer is not None
        self.completer.submit(entry, req)
        self._fill()

    def _release(self, entry: InFlight) -> None:
        self.inflight.set_phase(entry, Phase.RELEASING)
        assert self.completer is not None
        self.completer.submit(entry, self._request(entry, states.release()))

    def _abandon(self, entry: InFlight, why: str) -> None:
        self.inflight.set_phase(entry, Phase.ABANDONED)
        self.lost += 1
        self.inflight.remove(entry)
        self._fill()
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
        if result.state == "succeeded" and entry.phase is not Phase.RELEASING:
            if log.isEnabledFor(logging.DEBUG):  # skip building the line's fields otherwise
                # A line per job would cost more than a short job itself; the worker's
                # summary, metrics and the attempt records say what ran.
                log.debug(
                    "job %s (%s) succeeded in %d ms",
                    job.id,
                    job.task,
                    req.runtime_ms or 0,
                    extra=self.log_fields(job) | {"runtime_ms": req.runtime_ms},
                )
            return
        ids = self.log_fields(job)
        if entry.phase is Phase.RELEASING:
            self.released += 1
            if entry.task is None:
                return  # a prefetched job that never started: said once, at shutdown
            log.info(
                "job %s (%s): released to %s, attempt not spent",
                job.id,
                job.task,
                result.state,
                extra=ids,
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
        if entry.phase is Phase.BUFFERED:  # never started: nothing to stop
            self._abandon(entry, "a heartbeat found another owner before the job started")
            return
        if entry.phase is not Phase.RUNNING:
            return  # a queued outcome or release decides for itself, fenced
        if self._isolated(entry):
            self.processes.kill(entry.job.id)  # type: ignore[union-attr]
        elif entry.task is not None:
            entry.task.cancel()
        self._abandon(entry, "a heartbeat found another owner, or the job is no longer running")

    def on_cancel(self, entry: InFlight) -> None:
        if entry.phase is Phase.BUFFERED:  # never started: cancelled without running
            entry.cancel_requested = True
            log.info("job %s (%s): cancel requested before it started", *_names(entry))
            self._finish(entry, self._request(entry, states.cancel_running()))
            return
        if entry.phase is not Phase.RUNNING or entry.cancel_requested:
            return
        entry.cancel_requested = True
        task = self.tasks.get(entry.job.task)
        if self._isolated(entry):
            log.info("job %s (%s): cancel requested; killing its process", *_names(entry))
            self.processes.kill(entry.job.id)  # type: ignore[union-attr]
        elif task is not None and task.is_async and entry.task is not None:
            log.info("job %s (%s): cancel requested; stopping it", entry.job.id, entry.job.task)
            entry.task.cancel()
        else:
            log.info(
                "job %s (%s): cancel requested; a sync task cannot be interrupted, so it is "
                "cancelled when its function returns",
                entry.job.id,
                entry.job.task,
            )


def _name(entry: InFlight) -> str:
    return f"durq-job-{entry.job.id}"


def _names(entry: InFlight) -> tuple[int, str]:
    return entry.job.id, entry.job.task
