"""The App that worker subprocesses in these tests run (``--app tests.worker.apps:app``).

It reads ``DURQ_DATABASE_URL`` like any App; each test sets it for its own database.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import durq

app = durq.App()


@app.task(retry=durq.Fixed([0]), max_attempts=3)
def block(gate: str, seconds: float = 30.0) -> dict[str, Any]:
    """Run until the file ``gate`` exists (or ``seconds`` pass); report who finished it."""
    deadline = time.monotonic() + seconds
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"pid": os.getpid(), "gate_opened": Path(gate).exists()}


@app.task(retry=durq.Fixed([0]), max_attempts=3)
async def async_block(gate: str, seconds: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while not Path(gate).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return {"pid": os.getpid()}


@app.task
def sleep_for(seconds: float) -> dict[str, Any]:
    time.sleep(seconds)
    return {"pid": os.getpid(), "slept": seconds}


@app.task
def ok(n: int = 0) -> dict[str, Any]:
    return {"n": n, "pid": os.getpid()}


@app.task(max_attempts=1)
def raises() -> None:
    raise RuntimeError("the upstream API answered 500")


@app.task(max_attempts=1, timeout=0.3)
def too_slow() -> None:
    time.sleep(3)


@app.task(max_attempts=1, timeout=0.3)
async def async_too_slow() -> None:
    await asyncio.sleep(30)


@app.task(max_attempts=1)
def not_json() -> Any:
    return {"when": object()}


@app.task(max_attempts=1)
def exits() -> None:
    raise SystemExit(3)


@app.task(max_attempts=1, timeout=5)
def own_timeout() -> None:
    raise TimeoutError("the upstream read timed out")


@app.task(max_attempts=1)
async def async_own_timeout() -> None:
    raise TimeoutError("the upstream read timed out")


@app.task(max_attempts=1)
def kills_its_process() -> None:
    """A task that takes its whole process down, as a crashing extension would."""
    os._exit(7)


def _lookup(record: dict[str, Any]) -> Any:
    return record["missing"]


@app.task(max_attempts=2, retry=durq.Fixed([3600]))
def fails_in_a_helper() -> None:
    """Fails deep in a helper: the stored traceback must show where."""
    _lookup({})
