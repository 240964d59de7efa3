"""The worker's composition root: wires producer, executor, completer, notifier and
maintenance together, handles signals and graceful shutdown. (Several processes:
:mod:`.supervisor`.)

Shutdown (SIGTERM or SIGINT, or :meth:`Worker.request_stop`):

1. stop claiming;
2. let running jobs finish for up to ``shutdown_timeout`` seconds, heartbeating meanwhile;
3. stop the jobs still running and release each once its code has stopped: a fenced write
   puts it back to ``queued`` without spending its attempt (``states.release()``; the
   attempt record says ``released``). Code that cannot be stopped (a sync task's thread,
   an async task that ignores the cancel) keeps its lease, heartbeated, until it returns;
   past ``shutdown_hard_timeout`` more seconds the worker gives up on it, writes nothing
   for it and exits 1, so its lease expires and the reclaimer retries it;
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
import socket
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._engine import pipeline
from .._engine.identity import default_worker_id
from .._engine.outage import Outage, retry_transient
from .._engine.secrets import keyring_from_settings
from .._engine.signing import signer_from_settings
from .._maintenance.loop import Maintenance
from ..errors import ConfigurationError
from ..settings import redact_url
from .completer import Completer
from .config import TaskThreads, WorkerApp, resolve_queues, worker_settings
from .delivery_process import deliverer_for_worker
from .executor import Executor
from .heartbeater import Heartbeater
from .inflight import InFlightJobs
from .loopconns import LoopConnections
from .notifier import Notifier
from .processes import AppLoader, task_processes
from .producer import Producer
from .shutdown import GracefulShutdown, close_loop

__all__ = ["Worker"]

log = logging.getLogger("durq.worker")
logging.getLogger("durq").addHandler(logging.NullHandler())  # a library stays quiet by default

T = TypeVar("T")

#: Threads beyond ``concurrency`` for sync tasks: a timed-out sync task cannot be killed
#: and keeps its thread until it returns; the spares keep the pool at full strength.
SPARE_TASK_THREADS = 4
#: How long shutdown waits for the last outcomes to be written.
FLUSH_TIMEOUT = 15.0
#: How long shutdown keeps trying to mark the worker stopped while the database is away.
BOOKKEEPING_TIMEOUT = 10.0


class Worker(GracefulShutdown):
    """One worker process: claims, runs and completes jobs until stopped.

    ``Worker(app, concurrency=8).run()`` blocks and returns the exit code; from another
    thread, :meth:`request_stop` starts a graceful shutdown. Options left as None come
    from ``app.settings`` (``DURQ_*``), validated; ``app`` itself is not changed.

    ``pool="process"`` runs every task in a task process (``isolated=True`` tasks run in
    one whatever the pool), loaded by ``app_loader`` or else by the module attribute that
    holds ``app``: a crash there fails only its job's attempt (:mod:`.processes`).

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
        prefetch: int | None = None,
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
        deliveries: bool = True,
        pool: str | None = None,
        max_tasks_per_child: int | None = None,
        shutdown_hard_timeout: float | None = None,
        app_loader: AppLoader | None = None,
    ) -> None:
        if max_jobs is not None and max_jobs < 1:
            raise ConfigurationError(f"max_jobs must be >= 1, got {max_jobs}")
        self.queues = resolve_queues(app, queues)
        self.settings = s = worker_settings(
            app.settings,
            {
                "concurrency": concurrency,
                "prefetch": prefetch,
                "poll_interval": poll_interval,
                "lease_seconds": lease_seconds,
                "heartbeat_seconds": heartbeat_seconds,
                "shutdown_timeout": shutdown_timeout,
                "shutdown_hard_timeout": shutdown_hard_timeout,
                "pool": pool,
                "max_tasks_per_child": max_tasks_per_child,
                "listen_notify": listen_notify,
                "queues": ",".join(self.queues),
            },
        )
        self.driver = driver = app.driver
        signer = signer_from_settings(s)
        runtime = pipeline.Runtime(
            driver,
            app.tasks,
            s.lease_seconds,
            keyring=keyring_from_settings(s),
            signer=signer,
            refresh_timeout=s.refresh_timeout,
            max_result_bytes=s.max_result_bytes,
            max_json_depth=s.max_json_depth,
        )
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
        #: Sync-task threads still running when the worker returned (see the CLI's exit).
        self.abandoned_threads = 0
        #: Jobs whose code still ran past the hard shutdown deadline (left to expire).
        self.left_running = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested_at: float | None = None
        self._stop_early = False
        self._signals = 0
        self._stop_event = asyncio.Event()
        self._db_pool = concurrent.futures.ThreadPoolExecutor(6, thread_name_prefix="durq-db")
        self._task_pool = TaskThreads(s.concurrency + SPARE_TASK_THREADS)
        self.inflight = InFlightJobs(s.concurrency, s.prefetch)
        self.processes = task_processes(app, s, self.worker_id, app_loader)
        self.executor = Executor(
            runtime,
            worker_id=self.worker_id,
            inflight=self.inflight,
            pool=self._task_pool,
            processes=self.processes,
        )
        #: Claims and plain outcome writes awaited on the event loop (PostgreSQL).
        self.loop_conns = (
            LoopConnections(driver)
            if s.loop_connections and driver.capabilities.loop_connections
            else None
        )
        self.completer: Completer[Any, Any] = Completer(
            driver,
            db=self._db,
            on_written=self.executor.on_written,
            write_on_loop=self.loop_conns.write_jobs if self.loop_conns is not None else None,
        )
        self.executor.completer = self.completer
        self.heartbeater = Heartbeater(
            driver,
            worker_id=self.worker_id,
            inflight=self.inflight,
            db=self._db,
            lease_seconds=s.lease_seconds,
            heartbeat_seconds=s.heartbeat_seconds,
            processed=lambda: self.processed,
            on_lost=self.executor.on_lost,
            on_cancel=self.executor.on_cancel,
        )
        self.producer = Producer(
            driver,
            queues=self.queues,
            worker_id=self.worker_id,
            inflight=self.inflight,
            accept=self.executor.accept,
            db=self._db,
            poll_interval=s.poll_interval,
            lease_seconds=s.lease_seconds,
            budget=self.max_jobs,
            once=once,
            loop_conns=self.loop_conns,
        )
        self.notifier = Notifier(driver, self.queues, self._wake_threadsafe, listen=s.listen_notify)
        #: Outbox delivery in this process (``--no-deliveries`` turns it off).
        self.deliverer = deliverer_for_worker(driver, s, self.worker_id, self._db, deliveries)
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
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # as asyncio.run does
        try:
            self.exit_code = loop.run_until_complete(self._main(install_signals))
        finally:
            try:
                close_loop(loop, wait_for_tasks=not self.left_running)
            finally:
                asyncio.set_event_loop(None)
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

    @property
    def outcomes(self) -> Counter[str]:
        """Outcomes written, by the state they left the job in."""
        return self.executor.outcomes

    @property
    def released(self) -> int:
        return self.executor.released

    @property
    def processed(self) -> int:
        """Jobs run to an outcome (the worker row's ``processed``): every outcome written
        but the releases, which hand a job back without running it to its end."""
        return self.completer.written - self.executor.released

    @property
    def lost(self) -> int:
        """Jobs abandoned because their lease was lost."""
        return self.executor.lost

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
            "deliveries": self.deliverer.stats() if self.deliverer is not None else None,
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
            if self.deliverer is not None:
                self.deliverer.start()
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
            self.executor.stop_starting()
            self.executor.release_all()
            if not await self._stopped_by(loop.time() + self.settings.shutdown_hard_timeout):
                self.left_running = self.executor.leave_running()
        finally:
            if self.deliverer is not None:
                await self.deliverer.stop(self.flush_timeout)
            if not await self.completer.stop(self.flush_timeout):
                code = 1  # outcomes were lost: the supervisor or operator must know
            await self.heartbeater.stop()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self._shutdown_parts()
        if self.left_running:
            code = 1  # the jobs still running are left to expire: the operator must know
        log.info("worker %s stopped (%s)", self.worker_id, self._summary())
        return code

    def _log_started(self) -> None:
        for warning in self.driver.setup_warnings():
            log.warning("%s", warning, extra={"worker_id": self.worker_id})
        s = self.settings
        log.info(
            "worker %s started on %s: queues=%s concurrency=%d poll_interval=%gs lease=%gs "
            "prefetch=%d heartbeat=%gs shutdown_timeout=%gs wake-ups=%s%s",
            self.worker_id,
            redact_url(self.driver.url),
            ",".join(self.queues),
            s.concurrency,
            s.poll_interval,
            s.lease_seconds,
            s.prefetch,
            s.heartbeat_seconds,
            s.shutdown_timeout,
            self.notifier.mode,
            f" max_jobs={self.max_jobs}" if self.max_jobs else "",
            extra={"worker_id": self.worker_id, "database": redact_url(self.driver.url)},
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
        def write() -> None:
            with self.driver.transaction() as ex:
                self.driver.worker_stop(ex, self.worker_id, self.processed)

        # Right after a restart the first try may meet a dropped connection: try again.
        retry_transient(self.driver, write, timeout=BOOKKEEPING_TIMEOUT)

    # ---- stopping ----------------------------------------------------------------------

    def _wake_threadsafe(self, reason: str) -> None:
        loop, producer = self._loop, self.producer
        if loop is not None and producer is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(producer.wake, reason)

    async def _shutdown_parts(self) -> None:
        self.notifier.stop()
        if self.loop_conns is not None:
            await self.loop_conns.close()
        try:
            await self._db(self._mark_stopped)
        except Exception as exc:
            log.warning("could not mark worker %s stopped: %s", self.worker_id, exc)
        if self.maintenance is not None:
            try:  # a leader that cannot say so is replaced when its lease runs out
                await self._db(self.maintenance.close)
            except Exception as exc:
                log.warning("could not give up the leader role: %s", exc)
        if self.processes is not None:
            await self._db(self.processes.close)
        self._task_pool.shutdown(wait=False, cancel_futures=True)
        self.abandoned_threads = self._task_pool.busy
        self._db_pool.shutdown(wait=True)

    async def _maintain(self) -> None:
        assert self.maintenance is not None
        outage = Outage("maintenance", self.driver, logging.getLogger("durq.maintenance"))
        while True:
            try:
                delay = await self._db(self.maintenance.step)
            except Exception as exc:  # reclaim, leader and periodic ticks: back within ~1 s
                delay = outage.failed(exc, "round")
            else:
                outage.ok()
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
        if self.left_running:
            parts.append(f"{self.left_running} left running (their leases expire)")
        summary = ", ".join(parts) or "no jobs"
        if self.deliverer is not None and self.deliverer.attempted:
            summary += f"; {self.deliverer.summary()}"
        return summary
