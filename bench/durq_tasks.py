"""The durq App a benchmark worker runs: one no-op task that can report its latency."""

from __future__ import annotations

import durq

from . import sink

app = durq.App()  # DURQ_DATABASE_URL names the benchmark database


@app.task(name="bench.job", max_attempts=3)
async def job(n: int = 0, t: float | None = None) -> None:
    # async: a no-op runs on the worker's event loop, like the peers' async handlers
    sink.record(t)
