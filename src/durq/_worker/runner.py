"""The worker's composition root: wires producer, executor, completer, notifier and
maintenance together, handles signals and graceful shutdown. (Several processes:
:mod:`.supervisor`.)

Shutdown (SIGTERM or SIGINT, or :meth:`Worker.request_stop`):

1. stop claiming;
2. let running jobs finish for up to ``shutdown_timeout`` seconds, heartbeating meanwhile;
3. release the jobs still running: a fenced write puts each back to ``queued`` without
   spending its attempt (``states.release()``; the attempt record says ``released``);
4. write the last outcomes, mark the worker stopped, give up the leader role; exit 0.

A second signal exits at once (code 1): nothing more is written, and the leases of the
jobs still held expire and are reclaimed by another worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import socket
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import pydantic

from .. import states
from .._drivers import Driver, FinishRequest
from .._engine import pipeline
from .._engine.identity import default_worker_id
from .._engine.policy import unwritable
from .._engine.schedule import PeriodicTask
from .._engine.validate import validate_queue
from .._maintenance.loop import Maintenance
from ..errors import ConfigurationError, LeaseLost, ValidationError
from ..settings import Settings
from ..task import Task
from ..types import Job
from .completer import Completer, Written
from .heartbeater import Heartbeater
from .inflight import InFlight, InFlightJobs, Phase
from .notifier import Notifier
from .producer import Producer


class WorkerApp(Protocol):
    """What a worker needs from ``durq.App``: its database, tasks and schedules."""

    @property
    def driver(self) -> Driver: ...

    settings: Settings
    tasks: dict[str, Task[Any, Any]]
    periodic_tasks: list[PeriodicTask]

    def enqueue_tick(self, schedule: PeriodicTask, tick: datetime) -> tuple[Job, bool]: ...


__all__ = ["Worker", "resolve_queues", "worker_settings"]

log = logging.getLogger("durq.worker")
logging.getLogger("durq").addHandler(logging.NullHandler())  # a library stays quiet by default

T = TypeVar("T")

#: Threads beyond ``concurrency`` for sync tasks: a timed-out sync task cannot be killed
#: and keeps its thread until it returns; the spares keep the pool at full strength.
SPARE_TASK_THREADS = 4
#: How long shutdown waits for the last outcomes to be written.
FLUSH_TIMEOUT = 15.0


def worker_settings(settings: Settings, overrides: dict[str, Any]) -> Settings:
    """``settings`` with ``overrides`` applied and validated like ``DURQ_*`` values
    (so ``poll_interval=0`` becomes 0.1 here too)."""
    values = settings.model_dump() | {k: v for k, v in overrides.items() if v is not None}
    try:
        checked = Settings(**values)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigurationError(f"invalid worker settings: {problems}") from None
    if checked.heartbeat_seconds >= checked.lease_seconds:
        raise ConfigurationError(
            f"heartbeat_seconds ({checked.heartbeat_seconds:g}) must be shorter than "
            f"lease_seconds ({checked.lease_seconds:g}), or leases expire between heartbeats; "
            "e.g. --lease-seconds 30 --heartbeat-seconds 10"
        )
    return checked


def resolve_queues(app: WorkerApp, queues: str | Sequence[str] | None = None) -> list[str]:
    """The queues to work: as given; else ``DURQ_QUEUES`` if set; else every queue the
    App's tasks and periodic schedules use (``default_queue`` if it has none)."""
    if queues is None and "queues" in app.settings.model_fields_set:
        queues = app.settings.queues
    if queues is None:
        names = {t.queue for t in app.tasks.values()}
        names |= {p.queue for p in app.periodic_tasks if p.queue}
        found = sorted(names) or [app.settings.default_queue]
    else:
        items = queues.split(",") if isinstance(queues, str) else list(queues)
        found = list(dict.fromkeys(q.strip() for q in items if q.strip()))
    if not found:
        raise ConfigurationError("no queues to work: give --queues a,b (or DURQ_QUEUES)")
    try:
        return [validate_queue(q) for q in found]
    except ValidationError as exc:
        raise ConfigurationError(str(exc)) from None


class TaskThreads(concurrent.futures.ThreadPoolExecutor):
    """The thread pool for sync tasks; knows how many are running right now."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="durq-task")
        self.busy = 0
        self._busy_lock = threading.Lock()

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        def counted() -> T:
            with self._busy_lock:
                self.busy += 1
            try:
                return fn(*args, **kwargs)
            finally:
                with self._busy_lock:
                    self.busy -= 1

        return super().submit(counted)


class Worker:
    """One worker process: claims, runs and completes jobs until stopped.

    ``Worker(app, concurrency=8).run()`` blocks and returns the exit code; from another
    thread, :meth:`request_stop` starts a graceful shutdown. Options left as None come
    from ``app.settings`` (``DURQ_*``), validated; ``app`` itself is not changed.

    Every part is built here, before :meth:`run`: the producer (claims), the completer
    (fenced writes), the heartbeater, the notifier and maintenance. ``run`` only starts
    them, waits for a stop, and stops them in order.
    """

    def __init__(
        self,
        app: WorkerApp,
        *,
        queues: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        poll_interval: float | None = None,
        lease_seconds: float | None = None,
        heartbeat_seconds: float | None = None,
        shutdown_timeout: float | None = None,
        listen_notify: bool | None = None,
        max_jobs: int | None = None,
        once: bool = False,
        maintenance: bool = True,
        prune_interval: float = 60.0,
        worker_id: str | None = None,
        parent_pid: int | None = None,
        flush_timeout: float = FLUSH_TIMEOUT,
    ) -> None:
        if max_jobs is not None and max_jobs < 1:
            raise ConfigurationError(f"max_jobs must be >= 1, got {max_jobs}")
        self.queues = resolve_queues(app, queues)
        self.settings = s = worker_settings(
            app.settings,
            {
                "concurrency": concurrency,
                "poll_interval": poll_interval,
                "lease_seconds": lease_seconds,
                "heartbeat_seconds": heartbeat_seconds,
                "shutdown_timeout": shutdown_timeout,
                "listen_notify": listen_notify,
                "queues": ",".join(self.queues),
            },
        )
        self.driver = driver = app.driver
        self.tasks: Mapping[str, Task[Any, Any]] = app.tasks
        self.runtime = pipeline.Runtime(driver, app.tasks, s.lease_seconds)
        self.max_jobs = 1 if once else max_jobs
        self.once = once
        self.worker_id = worker_id or default_worker_id()
        self.parent_pid = parent_pid
        self.flush_timeout = flush_timeout
        #: Set once the worker is registered and claiming (tests and the demo wait on it).
        self.ready = threading.Event()
        #: Set when :meth:`run` has returned.
        self.finished = threading.Event()
        self.exit_code: int | None = None
        self.outcomes: Counter[str] = Counter()
        self.released = 0
        self.lost = 0
        #: Sync-task threads still running when the worker returned (see the CLI's exit).
        self.abandoned_threads = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested_at: float | None = None
        self._stop_early = False
        self._signals = 0
        self._stop_event = asyncio.Event()
        self._db_pool = concurrent.futures.ThreadPoolExecutor(6, thread_name_prefix="durq-db")
        self._task_pool = TaskThreads(s.concurrency + SPARE_TASK_THREADS)
        self.inflight = InFlightJobs(s.concurrency)
        self.completer = Completer(driver, db=self._db, on_written=self._on_written)
        self.heartbeater = Heartbeater(
            driver,
            worker_id=self.worker_id,
            inflight=self.inflight,
            db=self._db,
            lease_seconds=s.lease_seconds,
            heartbeat_seconds=s.heartbeat_seconds,
            processed=lambda: self.completer.written,
            on_lost=self._on_lost,
            on_cancel=self._on_cancel,
        )
        self.producer = Producer(
            driver,
            queues=self.queues,
            worker_id=self.worker_id,
            inflight=self.inflight,
            start_job=self._start_job,
            db=self._db,
            poll_interval=s.poll_interval,
            lease_seconds=s.lease_seconds,
            budget=self.max_jobs,
            once=once,
        )
        self.notifier = Notifier(driver, self.queues, self._wake_threadsafe, listen=s.listen_notify)
        self.maintenance: Maintenance | None = None
        if maintenance:
            self.maintenance = Maintenance(
                driver,
                s,
                self.worker_id,
                schedules=app.periodic_tasks,
                enqueue_tick=app.enqueue_tick,
                reclaim_interval=min(5.0, max(0.2, s.lease_seconds / 4)),
                prune_interval=prune_interval,
                on_reclaimed=lambda: self._wake_threadsafe("reclaim"),
            )

    # ---- public ------------------------------------------------------------------------

    def run(self, *, install_signals: bool | None = None) -> int:
        """Work until stopped (or ``once``/``max_jobs`` is done); returns the exit code."""
        if install_signals is None:
            install_signals = threading.current_thread() is threading.main_thread()
        try:
            self.exit_code = asyncio.run(self._main(install_signals))
        finally:
            self.finished.set()
        return self.exit_code

    def request_stop(self) -> None:
        """Start a graceful shutdown; safe from any thread, before or during :meth:`run`."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._stop_early = True
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing left to stop
            loop.call_soon_threadsafe(self._begin_stop)

    def stats(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "claimed": self.producer.claimed,
            "written": self.completer.written,
            "unwritable": self.completer.unwritable,
            "outcomes": dict(self.outcomes),
            "released": self.released,
            "lost": self.lost,
            "wakeups": dict(self.producer.wakeups),
        }

    # ---- start, wait, stop -------------------------------------------------------------

    async def _main(self, install_signals: bool) -> int:
        loop = asyncio.get_running_loop()
        self._loop = loop
        if install_signals:  # before anything slow: a signal while starting stops cleanly
            self._install_signal_handlers(loop)
        try:  # a database that is away or not migrated fails the start with its own error
            await self._db(self._register)
            if self.maintenance is not None:  # stale leases before the first claim
                await self._db(self.maintenance.reclaim)
        except BaseException:
            self._task_pool.shutdown(wait=False)
            self._db_pool.shutdown(wait=False)
            raise
        background: list[asyncio.Task[Any]] = []
        code = 0
        try:
            self.notifier.start()
            self.completer.start()
            self.heartbeater.start()
            if self.maintenance is not None:
                background.append(loop.create_task(self._maintain(), name="durq-maintenance"))
            if self.parent_pid is not None:
                background.append(loop.create_task(self._watch_parent(), name="durq-parent"))
            self._log_started()
            self.ready.set()
            if self._stop_early:
                self._begin_stop()
            producing = loop.create_task(self.producer.run(), name="durq-producer")
            stopping = loop.create_task(self._stop_event.wait())
            await asyncio.wait({producing, stopping}, return_when=asyncio.FIRST_COMPLETED)
            self.producer.stop()
            await producing
            stopping.cancel()
            await self._drain()
        except Exception:
            log.exception("worker %s failed; releasing its jobs", self.worker_id)
            code = 1
            self._release_all()
        finally:
            if not await self.completer.stop(self.flush_timeout):
                code = 1  # outcomes were lost: the supervisor or operator must know
            await self.heartbeater.stop()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self._shutdown_parts()
        log.info("worker %s stopped (%s)", self.worker_id, self._summary())
        return code

    def _log_started(self) -> None:
        s = self.settings
        log.info(
            "worker %s started: queues=%s concurrency=%d poll_interval=%gs lease=%gs "
            "heartbeat=%gs shutdown_timeout=%gs wake-ups=%s%s",
            self.worker_id,
            ",".join(self.queues),
            s.concurrency,
            s.poll_interval,
            s.lease_seconds,
            s.heartbeat_seconds,
            s.shutdown_timeout,
            self.notifier.mode,
            f" max_jobs={self.max_jobs}" if self.max_jobs else "",
        )

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking database call in the worker's database threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db_pool, fn, *args)

    def _register(self) -> None:
        with self.driver.transaction() as ex:
            self.driver.worker_register(
                ex,
                worker_id=self.worker_id,
                hostname=socket.gethostname(),
                pid=os.getpid(),
                queues=self.queues,
                concurrency=self.settings.concurrency,
                heartbeat_seconds=self.settings.heartbeat_seconds,
            )

    def _mark_stopped(self) -> None:
        with self.driver.transaction() as ex:
            self.driver.worker_stop(ex, self.worker_id, self.completer.written)

    # ---- jobs --------------------------------------------------------------------------

    def _start_job(self, job: Job) -> None:
        entry = self.inflight.add(job)
        assert self._loop is not None
        entry.task = self._loop.create_task(self._execute(entry), name=f"durq-job-{job.id}")

    async def _execute(self, entry: InFlight) -> None:
        job = entry.job
        try:
            execution = await pipeline.run_async(self.runtime, job, self.worker_id, self._task_pool)
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
            log.exception("job %s (%s): could not conclude its attempt", job.id, job.task)
            req = self._request(entry, unwritable(f"{type(exc).__name__}: {exc}"))
        if req is None:  # the task itself hit LeaseLost through its context
            self._abandon(entry, "the task's own fenced write found the lease lost")
            return
        self._finish(entry, req)

    def _request(self, entry: InFlight, change: states.Change) -> FinishRequest:
        job = entry.job
        return FinishRequest(job.id, job.claim_version, self.worker_id, change, entry.runtime_ms)

    def _finish(self, entry: InFlight, req: FinishRequest) -> None:
        self.inflight.set_phase(entry, Phase.FINISHING)
        self.completer.submit(entry, req)

    def _release(self, entry: InFlight) -> None:
        self.inflight.set_phase(entry, Phase.RELEASING)
        if entry.task is not None:
            entry.task.cancel()  # an async task stops here; a sync thread runs on, ignored
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

    def _on_written(self, entry: InFlight, req: FinishRequest, result: Written) -> None:
        self.inflight.remove(entry)
        job = entry.job
        if isinstance(result, LeaseLost):
            self.lost += 1
            log.warning(
                "job %s (%s): lease lost before its outcome was written; another owner has "
                "it now, nothing was written",
                job.id,
                job.task,
            )
            return
        if result is None:
            return
        self.outcomes[str(result.state)] += 1
        if entry.phase is Phase.RELEASING:
            self.released += 1
            log.info(
                "job %s (%s): released to %s, attempt not spent", job.id, job.task, result.state
            )
        elif result.state == "succeeded":
            log.info("job %s (%s) succeeded in %d ms", job.id, job.task, req.runtime_ms or 0)
        else:
            log.info(
                "job %s (%s) attempt %d/%d: %s: %s → %s%s",
                job.id,
                job.task,
                job.attempt,
                job.max_attempts,
                result.last_error_code,
                result.last_error,
                result.state,
                f" (next attempt at {result.run_at.isoformat(timespec='seconds')})"
                if result.state in ("retry_wait", "queued")
                else "",
            )

    def _on_lost(self, entry: InFlight) -> None:
        if entry.phase is not Phase.RUNNING:
            return  # a queued outcome or release decides for itself, fenced
        if entry.task is not None:
            entry.task.cancel()
        self._abandon(entry, "a heartbeat found another owner, or the job is no longer running")

    def _on_cancel(self, entry: InFlight) -> None:
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

    # ---- stopping ----------------------------------------------------------------------

    def _wake_threadsafe(self, reason: str) -> None:
        loop, producer = self._loop, self.producer
        if loop is not None and producer is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(producer.wake, reason)

    def _begin_stop(self) -> None:
        if self._stop_requested_at is not None:
            return
        assert self._loop is not None
        self._stop_requested_at = self._loop.time()
        log.info(
            "worker %s stopping: no new claims; waiting up to %gs for %d running job(s)",
            self.worker_id,
            self.settings.shutdown_timeout,
            len(self.inflight.running()),
        )
        self._stop_event.set()
        self.inflight.changed.fire()

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info(
                "received %s: shutting down gracefully (send it again to exit at once)", sig.name
            )
            self._begin_stop()
            return
        log.warning(
            "received %s again: exiting now; the leases of %d job(s) will expire and another "
            "worker will reclaim them",
            sig.name,
            len(self.inflight),
        )
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        os._exit(1)

    async def _drain(self) -> None:
        """Wait for running jobs (bounded by shutdown_timeout once a stop was asked),
        release the rest, then write every outcome."""
        loop = asyncio.get_running_loop()
        while self.inflight.running():
            left: float | None = None
            if self._stop_requested_at is not None:
                left = self._stop_requested_at + self.settings.shutdown_timeout - loop.time()
                if left <= 0:
                    break
            stop_pending = self._stop_requested_at is None
            await self.inflight.changed.wait(left)
            if stop_pending and self._stop_requested_at is not None:
                continue  # a stop arrived: the timeout starts counting now
        self._release_all()

    def _release_all(self) -> None:
        """Release every job still running (the completer writes them on stop)."""
        leftovers = self.inflight.running()
        if leftovers:
            log.info(
                "shutdown timeout passed: releasing %d unfinished job(s) back to queued "
                "without spending their attempt",
                len(leftovers),
            )
        for entry in leftovers:
            self._release(entry)

    async def _shutdown_parts(self) -> None:
        self.notifier.stop()
        try:
            await self._db(self._mark_stopped)
            if self.maintenance is not None:
                await self._db(self.maintenance.close)
        except Exception as exc:
            log.warning("could not mark worker %s stopped: %s", self.worker_id, exc)
        self._task_pool.shutdown(wait=False, cancel_futures=True)
        self.abandoned_threads = self._task_pool.busy
        self._db_pool.shutdown(wait=True)

    async def _maintain(self) -> None:
        assert self.maintenance is not None
        while True:
            try:
                delay = await self._db(self.maintenance.step)
            except Exception as exc:
                delay = 5.0
                log.warning("maintenance round failed (%s); next try in %.0fs", exc, delay)
            await asyncio.sleep(delay)

    async def _watch_parent(self) -> None:
        while os.getppid() == self.parent_pid:
            await asyncio.sleep(1.0)
        log.warning("the supervisor (pid %s) is gone; shutting down", self.parent_pid)
        self._begin_stop()

    def _summary(self) -> str:
        parts = [f"{n} {state}" for state, n in sorted(self.outcomes.items())]
        if self.released:
            parts.append(f"{self.released} released")
        if self.lost:
            parts.append(f"{self.lost} lost")
        return ", ".join(parts) or "no jobs"
