"""Task processes: jobs run in child processes, so a task that crashes its process (an
``os._exit``, a segfaulting extension, a SIGKILL) fails only its own attempt, recorded
as ``crashed`` with the exit code or signal, and the worker goes on (like Celery's
prefork pool).

Each child is started with ``spawn`` (never ``fork``: a forked child would share the
worker's database connections) and loads the App through the same import path as the
worker (``app_loader``). It runs one job at a time through the execution pipeline and
concludes it there (``pipeline.run_sync`` then ``pipeline.conclude``); the worker makes
the fenced write, so leases, heartbeats and outcome batching stay the worker's. A child
that dies is replaced by the next job that needs one; with ``max_tasks_per_child`` a
child retires after that many jobs.

Because a child can be killed, a job in one truly stops when the worker must stop it:
an operator's cancel and the end of the shutdown timeout kill its child, then write.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import logs, states
from .._drivers import FinishRequest
from .._engine import pipeline
from .._engine.policy import unwritable
from .._engine.secrets import keyring_from_settings
from .._engine.signing import signer_from_settings
from ..errors import ConfigurationError
from ..settings import Settings
from ..types import Job
from .config import WorkerApp

__all__ = ["AppLoader", "ImportPath", "Reply", "TaskProcesses", "describe_exit", "task_processes"]

log = logging.getLogger("durq.worker")

#: Loads the App in a child: a picklable callable (the CLI passes its ``import_app``).
AppLoader = Callable[[], WorkerApp]
#: What a child answers for a job: its fenced write, None (its lease was lost), or the
#: crash that ended the child first.
Reply = FinishRequest | states.Crashed | None

#: How long a child may take to import the App and open its database.
START_TIMEOUT = 60.0
#: How often a child checks that its worker is still alive.
PARENT_CHECK_SECONDS = 1.0


@dataclass(frozen=True)
class ImportPath:
    """Loads the App in a task process from ``module:attribute``, on ``database_url``:
    the loader for an App built in Python (the CLI passes its own ``import_app``)."""

    spec: str
    database_url: str

    @classmethod
    def of(cls, app: WorkerApp) -> ImportPath | None:
        """Where ``app`` can be imported from: a module attribute that is ``app`` (not
        in ``__main__``, which a task process does not run), or None."""
        for name, module in list(sys.modules.items()):
            if name in ("__main__", "__mp_main__") or module is None:
                continue
            for attribute, value in list(getattr(module, "__dict__", {}).items()):
                if value is app:
                    return cls(f"{name}:{attribute}", app.settings.database_url)
        return None

    def __call__(self) -> WorkerApp:
        module, _, attribute = self.spec.partition(":")
        app: Any = getattr(importlib.import_module(module), attribute)
        if app.settings.database_url != self.database_url:
            app.settings = app.settings.model_copy(update={"database_url": self.database_url})
            app.close()  # its next use connects to the worker's database
        return app  # type: ignore[no-any-return]


def describe_exit(pid: int | None, exitcode: int | None) -> str:
    """``exitcode`` (negative: the signal that killed it) as the crash's error message."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        how = f"was killed by signal {name} ({-exitcode})"
    else:
        how = f"exited with code {exitcode}"
    return (
        f"the task's process (pid {pid}) {how} while running the job; only this attempt "
        "failed. Fix the task, or requeue the job if the crash was transient"
    )


@dataclass(frozen=True)
class _Options:
    """What a child needs besides the App: the worker's validated settings and identity."""

    settings: Settings
    worker_id: str
    parent_pid: int
    max_tasks: int | None


class _Child:
    """One task process, driven from a worker thread (its calls block)."""

    def __init__(self, loader: AppLoader, options: _Options) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(
            target=child_main,
            args=(child_conn, loader, options),
            name="durq-task-process",
        )
        self._child_conn = child_conn
        self.started = False
        self.retired = False  # it said it exits after its last answer
        self.killed = False

    @property
    def usable(self) -> bool:
        return not self.retired and (not self.started or self.proc.is_alive())

    def call(self, job: Job, trace_context: str | None) -> Reply:
        """Run ``job`` in the child and wait for its answer or its death."""
        if not self.started:
            failed = self._start()
            if failed is not None:
                return failed
        if self.killed:  # stopped before it was sent: the job never ran
            return self._crashed()
        try:
            self.conn.send((job, trace_context))
        except (BrokenPipeError, ConnectionResetError, EOFError):
            return self._crashed()
        message = self._receive(None)
        if message is None:
            return self._crashed()
        _, reply, retiring = message
        if retiring:  # it exits now: wait, so nothing of this job still runs on return
            self.retired = True
            self.proc.join(START_TIMEOUT)
        return reply  # type: ignore[no-any-return]

    def kill(self) -> None:
        self.killed = True
        if self.started and self.proc.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)

    def close(self, timeout: float) -> None:
        """Ask an idle child to exit (it reads the end of its pipe), then make sure."""
        self.conn.close()  # closing twice is harmless
        if not self.started:
            self._child_conn.close()
        else:
            self.proc.join(timeout)
            if self.proc.is_alive():
                self.kill()
                self.proc.join(timeout)

    def _start(self) -> Reply:
        self.started = True
        self.proc.start()
        self._child_conn.close()  # the child holds the only other end: its death is EOF
        message = self._receive(START_TIMEOUT)
        if message is not None and message[0] == "ready":
            return None
        self.retired = True
        if message is not None:
            self.proc.join(START_TIMEOUT)
            return states.Crashed(f"the task process could not start: {message[1]}")
        hung = self.proc.is_alive()
        crash = self._crashed()
        if not hung:
            return crash
        return states.Crashed(
            f"the task process did not start within {START_TIMEOUT:g}s (importing the App "
            "or connecting to the database hangs there)"
        )

    def _receive(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The child's next message, or None if it died (or ``timeout`` passed)."""
        ready = multiprocessing.connection.wait([self.conn, self.proc.sentinel], timeout)
        if self.conn in ready:
            with contextlib.suppress(EOFError, OSError):
                return self.conn.recv()  # type: ignore[no-any-return]
        return None

    def _crashed(self) -> states.Crashed:
        self.retired = True
        self.kill()  # it may only have stopped answering (a start that timed out)
        self.proc.join(START_TIMEOUT)
        return states.Crashed(describe_exit(self.proc.pid, self.proc.exitcode))


class TaskProcesses:
    """The worker's task processes: up to one per job running in one at a time."""

    def __init__(
        self,
        loader: AppLoader,
        settings: Settings,
        *,
        worker_id: str,
        every_task: bool,
        isolated: frozenset[str],
        max_tasks_per_child: int | None = None,
    ) -> None:
        self.every_task = every_task
        self.isolated = isolated
        self._loader = loader
        self._options = _Options(settings, worker_id, os.getpid(), max_tasks_per_child)
        self._idle: list[_Child] = []
        self._busy: dict[int, _Child] = {}
        # Each job in a child keeps one thread waiting on it (the pipe and the child's
        # death); the executor's concurrency bounds how many.
        self._threads = concurrent.futures.ThreadPoolExecutor(
            settings.concurrency, thread_name_prefix="durq-task-process"
        )
        self.started = 0  # children started (replacements included)
        self.crashed = 0

    def takes(self, task: str) -> bool:
        """Does a job of ``task`` run in a task process?"""
        return self.every_task or task in self.isolated

    async def run(self, job: Job, trace_context: str | None = None) -> Reply:
        """Run ``job`` in an idle child (a new one if none is idle)."""
        child = self._acquire(job.id)
        loop = asyncio.get_running_loop()
        calling = loop.run_in_executor(self._threads, child.call, job, trace_context)
        calling.add_done_callback(lambda _: self._returned(job.id, child))
        try:
            reply = await asyncio.shield(calling)
        except asyncio.CancelledError:
            child.kill()  # whoever stops waiting must not leave the job's code running
            raise
        if isinstance(reply, states.Crashed):
            self.crashed += 1
        return reply

    def kill(self, job_id: int) -> bool:
        """Stop the job's code at once: SIGKILL its child. False if no child runs it."""
        child = self._busy.get(job_id)
        if child is None:
            return False
        child.kill()
        return True

    def close(self, timeout: float = 5.0) -> None:
        """End every child: idle ones exit, any still busy are killed."""
        for child in self._busy.values():
            child.kill()
        idle, self._idle = self._idle, []
        for child in idle:
            child.conn.close()  # all at once: each exits as it reads the end of its pipe
        for child in idle:
            child.close(timeout)
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _returned(self, job_id: int, child: _Child) -> None:
        if self._busy.get(job_id) is child:
            del self._busy[job_id]
        if child.usable:
            self._idle.append(child)

    def _acquire(self, job_id: int) -> _Child:
        while self._idle:
            child = self._idle.pop()
            if child.usable:
                break
        else:
            child = _Child(self._loader, self._options)
            self.started += 1
        self._busy[job_id] = child
        return child


# ---- inside a task process -------------------------------------------------------------


def child_main(conn: Any, loader: AppLoader, options: _Options) -> None:
    """A task process: load the App, then run each job sent until the pipe closes."""
    # The worker decides when its children stop: a terminal's Ctrl-C or a SIGTERM to the
    # whole group must not kill a job the worker is still letting finish.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(options.parent_pid,), daemon=True).start()
    s = options.settings
    with contextlib.suppress(Exception):
        logs.configure(s.log_level, s.log_format)
    try:
        app = loader()
        runtime = pipeline.Runtime(
            app.driver,
            app.tasks,
            s.lease_seconds,
            keyring=keyring_from_settings(s),
            signer=signer_from_settings(s),
            refresh_timeout=s.refresh_timeout,
        )
        with app.driver.read():  # connect now: a bad database fails the start, not a job
            pass
    except BaseException as exc:
        conn.send(("error", f"loading the App failed: {type(exc).__name__}: {exc}"))
        os._exit(3)
    conn.send(("ready", os.getpid()))
    done = 0
    while True:
        try:
            job, trace_context = conn.recv()
        except (EOFError, OSError):
            break  # the worker closed the pipe, or is gone
        before = set(threading.enumerate())
        reply = _run_one(runtime, job, options.worker_id, trace_context)
        done += 1
        # A sync task past its timeout leaves its thread running: retire, so it ends with us.
        retiring = _left_threads(before) or (
            options.max_tasks is not None and done >= options.max_tasks
        )
        try:
            conn.send(("done", reply, retiring))
        except Exception as exc:  # an answer that cannot be sent is its own dead letter
            why = f"{type(exc).__name__}: {exc}"
            conn.send(("done", _unsendable(job, options.worker_id, why), retiring))
        if retiring:
            break
    with contextlib.suppress(Exception):
        app.close()  # type: ignore[attr-defined]
    os._exit(0)  # threads a task left behind do not hold the exit


def _run_one(
    runtime: pipeline.Runtime, job: Job, worker_id: str, trace_context: str | None
) -> FinishRequest | None:
    execution = pipeline.run_sync(runtime, job, worker_id, trace_context)
    try:
        return pipeline.conclude(execution, worker_id)
    except Exception as exc:  # conclude() guards its rule; this is the last line
        change = unwritable(f"{type(exc).__name__}: {exc}")
        return FinishRequest.for_job(job, worker_id, change, execution.runtime_ms)


def _left_threads(before: set[threading.Thread]) -> bool:
    """Did the job leave a (non-daemon) thread running?"""
    return any(t.is_alive() and not t.daemon for t in threading.enumerate() if t not in before)


def _unsendable(job: Job, worker_id: str, why: str) -> FinishRequest:
    return FinishRequest.for_job(job, worker_id, unwritable(why), None)


def _exit_with_parent(parent_pid: int) -> None:
    """A child outliving its worker would run a job nobody holds a lease for."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(1)


def task_processes(
    app: WorkerApp, settings: Settings, worker_id: str, loader: AppLoader | None
) -> TaskProcesses | None:
    """The task processes this worker needs: every task's under ``pool="process"``, the
    ``isolated=True`` tasks' otherwise, none if no task runs in one."""
    every_task = settings.pool == "process"
    isolated = frozenset(name for name, task in app.tasks.items() if task.isolated)
    if not every_task and not isolated:
        return None
    loader = loader or ImportPath.of(app)
    if loader is None:
        why = "pool='process'" if every_task else f"isolated tasks ({', '.join(sorted(isolated))})"
        raise ConfigurationError(
            f"{why} need the App's import path to load it in task processes, and this App "
            "is no module's attribute: define it at module level (app = durq.App() in "
            "myproj/jobs.py), run `durq worker --app myproj.jobs:app`, or pass app_loader= "
            "(a picklable function that returns the App)"
        )
    return TaskProcesses(
        loader,
        settings,
        worker_id=worker_id,
        every_task=every_task,
        isolated=isolated,
        max_tasks_per_child=settings.max_tasks_per_child,
    )
