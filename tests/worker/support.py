"""Real worker processes and in-process workers for the tests, and waiting with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import durq
from durq._worker.runner import Worker

from ..waiting import wait_until

__all__ = [
    "APP",
    "WorkerProcess",
    "adopt_test_tasks",
    "all_in",
    "durq_env",
    "run_cli",
    "running_worker",
    "signal_name",
    "states_of",
    "wait_until",
    "worker_processes",
]

REPO = Path(__file__).resolve().parents[2]
APP = "tests.worker.apps:app"


def durq_env(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURQ_")}
    # This checkout's own sources first, whichever checkout the venv was installed from.
    path = os.pathsep.join([str(REPO / "src"), str(REPO)])
    env.update({"DURQ_DATABASE_URL": db_url, "PYTHONPATH": path}, **extra)
    return env


def run_cli(db_url: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``durq ARGS`` in a subprocess, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "durq.cli.main", *args],
        cwd=REPO,
        env=durq_env(db_url),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class WorkerProcess:
    """``durq worker`` as a real OS process, its log in a file."""

    def __init__(self, db_url: str, log_dir: Path, *args: str, app: str = APP, name: str = "w"):
        self.name = name
        self.log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "durq.cli.main", "worker", "--app", app, *args],
            cwd=REPO,
            env=durq_env(db_url, POD_NAME=name),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def worker_id(self) -> str:
        return f"{self.name}:{self.pid}"

    def log(self) -> str:
        return self.log_path.read_text()

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {self.name} did not exit within {timeout}s; its log:\n{self.log()}"
            ) from None

    def wait_ready(self, app: durq.App, timeout: float = 30.0) -> None:
        """Until the worker registered itself and is alive (or fail with its log)."""

        def registered() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited early:\n{self.log()}")
            return any(w.id == self.worker_id and w.alive for w in app.list_workers())

        wait_until(registered, timeout=timeout, what=f"worker {self.name} to start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@contextmanager
def worker_processes(db_url: str, log_dir: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``durq worker`` processes; every one is killed at the end, whatever happens."""
    started: list[WorkerProcess] = []

    def start(*args: str, app: str = APP, name: str = "w") -> WorkerProcess:
        proc = WorkerProcess(db_url, log_dir, *args, app=app, name=name)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()


@contextmanager
def running_worker(app: durq.App, **options: Any) -> Iterator[Worker]:
    """A :class:`Worker` in a thread of this process; stopped gracefully at the end."""
    worker = Worker(app, **options)
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    wait_until(
        lambda: worker.ready.is_set() or worker.finished.is_set(), what="the worker to start"
    )
    assert worker.ready.is_set(), "the worker stopped before it was ready"
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop within 30s"


def states_of(app: durq.App, jobs: list[durq.Job]) -> list[str]:
    return [str(app.get_job(j.id).state) for j in jobs]


def all_in(app: durq.App, jobs: list[durq.Job], *states: str) -> Callable[[], bool]:
    return lambda: all(s in states for s in states_of(app, jobs))


def signal_name(sig: int) -> str:
    return signal.Signals(sig).name


def adopt_test_tasks(app: durq.App) -> durq.App:
    """Register the tasks of :mod:`tests.worker.apps` on ``app`` too, so jobs this test
    enqueues carry the same defaults (retry policy, attempts) the worker process uses."""
    from dataclasses import replace

    from . import apps

    for task in apps.app.tasks.values():
        app.tasks[task.name] = replace(task, app=app)
    return app
