"""The Huey app a benchmark consumer runs: SqliteHuey with fsync (synchronous=FULL)."""

from __future__ import annotations

import os

from huey import SqliteHuey

from .. import sink

huey = SqliteHuey(
    "bench", filename=os.environ.get("DURQ_BENCH_HUEY_DB", "huey-bench.db"), fsync=True
)


@huey.task(name="bench")
def bench(n: int = 0, t: float | None = None) -> bool:
    sink.record(t)
    return True  # stored in Huey's result table: its record that the task finished
