"""Tasks that crash their process or refuse to stop, for the task-process and shutdown
tests (``--app tests.worker.pool_app:app``).

Tasks that must prove "never run twice at once" write their executions to a log file:
``start PID`` and ``end PID`` lines, and ``overlap PID`` when an execution starts while
one started earlier still runs in a live process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import durq

app = durq.App()


@app.task(max_attempts=1)
def crash_exit(code: int = 1) -> None:
    """Ends its process at once, as a C extension calling ``exit`` would."""
    os._exit(code)


@app.task(isolated=True, retry=durq.Fixed([0]), max_attempts=2)
def crash_kill() -> None:
    """Killed by a signal, as a segfault or the kernel's OOM killer would."""
    os.kill(os.getpid(), signal.SIGKILL)


@app.task
def neighbour(seconds: float = 0.2) -> dict[str, Any]:
    time.sleep(seconds)
    return {"pid": os.getpid()}


@app.task
async def async_neighbour() -> dict[str, Any]:
    return {"pid": os.getpid()}


@app.task(isolated=True, timeout=0.3, max_attempts=1)
def overruns(log: str) -> None:
    """Runs past its timeout: the thread it leaves must die with its task process."""
    _append(log, "start")
    time.sleep(30)


async def swallow_cancel(log: str, gate: str, seconds: float) -> dict[str, Any]:
    """Ignores every cancel and runs until ``gate`` exists or ``seconds`` pass."""
    _record(log, "start")
    deadline = time.monotonic() + seconds
    while not Path(gate).exists() and time.monotonic() < deadline:
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            _record(log, "cancel-ignored")
    _record(log, "end")
    return {"pid": os.getpid()}


app.task(name="swallow_cancel", retry=durq.Fixed([0]), max_attempts=3)(swallow_cancel)
app.task(name="swallow_timeout", timeout=0.3, max_attempts=1)(swallow_cancel)


@app.task(retry=durq.Fixed([0]), max_attempts=3)
def stuck_sync(log: str, gate: str, seconds: float = 30.0) -> dict[str, Any]:
    """A sync task no one can interrupt: runs until ``gate`` exists or ``seconds`` pass."""
    _record(log, "start")
    deadline = time.monotonic() + seconds
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    _record(log, "end")
    return {"pid": os.getpid()}


def _record(log: str, event: str) -> None:
    if event == "start" and _still_running(log):
        _append(log, "overlap")
    _append(log, event)


def _append(log: str, event: str) -> None:
    with open(log, "a") as f:
        f.write(f"{event} {os.getpid()}\n")


def _still_running(log: str) -> bool:
    """Did an execution start, and not end, in a process that is still alive?"""
    path = Path(log)
    if not path.exists():
        return False
    open_pids: set[int] = set()
    for line in path.read_text().splitlines():
        event, pid = line.split()
        if event == "start":
            open_pids.add(int(pid))
        elif event == "end":
            open_pids.discard(int(pid))
    return any(_alive(pid) for pid in open_pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def executions(log: str) -> list[tuple[str, int]]:
    """The log as ``(event, pid)`` pairs, in order."""
    path = Path(log)
    if not path.exists():
        return []
    return [(e, int(p)) for e, p in (line.split() for line in path.read_text().splitlines())]
