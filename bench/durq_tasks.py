"""The durq App a benchmark worker runs: one no-op task that can report its latency (or,
with ``DURQ_BENCH_TASK_MS``, one that awaits that long, as a job waiting on I/O would)."""

from __future__ import annotations

import asyncio
import os

import durq

from . import sink

if os.environ.get("DURQ_BENCH_TIMELINE"):  # bench.loop_stall: record the loop's idle time
    from .timeline import install

    install(os.environ["DURQ_BENCH_TIMELINE"])

app = durq.App()  # DURQ_DATABASE_URL names the benchmark database
WAIT_S = float(os.environ.get("DURQ_BENCH_TASK_MS", "0")) / 1000


@app.task(name="bench.job", max_attempts=3)
async def job(n: int = 0, t: float | None = None) -> None:
    # async: a no-op runs on the worker's event loop, like the peers' async handlers
    sink.record(t)
    if WAIT_S:
        await asyncio.sleep(WAIT_S)
