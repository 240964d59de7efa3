"""Huey on SQLite (``SqliteHuey(fsync=True)``, i.e. synchronous=FULL, WAL), the consumer
with worker threads and a short polling interval (``-d 0.01 -m 0.1``), the documented
knobs for a latency-sensitive queue."""

from __future__ import annotations

import os
import sqlite3
import time
from importlib.metadata import version
from typing import Any

from .. import sink
from ..measure import Worker, python
from ..subject import Subject

WORKERS = 4


class HueyPeer(Subject):
    name = "huey-sqlite"
    backend = "sqlite"
    family = "peer"
    workloads = frozenset({"W1", "W2", "W3", "W4", "W5", "RSS"})
    config_note = (
        f"SqliteHuey(fsync=True) (WAL, synchronous=FULL), results stored; consumer "
        f"-k thread -w {WORKERS} -d 0.01 -m 0.1"
    )

    def versions(self) -> dict[str, str]:
        return {"huey": version("huey")}

    def setup(self) -> None:
        self.path = self.ctx.tmp / "huey.db"
        os.environ["DURQ_BENCH_HUEY_DB"] = str(self.path)
        from . import huey_tasks

        self.tasks = huey_tasks
        self.huey = huey_tasks.huey
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.sent = 0

    def teardown(self) -> None:
        self.conn.close()

    def reset(self) -> None:
        self.huey.flush()
        self.sent = 0

    def enqueue_single(self, count: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            self.tasks.bench(n=i)
        self.sent += count
        return time.perf_counter() - start

    def _insert(self, kwargs: list[dict[str, Any]]) -> None:
        # Huey has no batch enqueue: write its serialised messages in one transaction.
        rows = [
            (self.huey.name, self.huey.serialize_task(self.tasks.bench.s(**kw)), 0) for kw in kwargs
        ]
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT INTO task (queue, data, priority) VALUES (?, ?, ?)", rows)
        self.conn.execute("COMMIT")
        self.sent += len(rows)

    def enqueue_batches(self, count: int, batch: int) -> float:
        start = time.perf_counter()
        for first in range(0, count, batch):
            self._insert([{"n": i} for i in range(first, min(count, first + batch))])
        return time.perf_counter() - start

    def load(self, count: int) -> None:
        self._insert([{"n": i} for i in range(count)])

    def probe(self, stamps: list[float]) -> None:
        if len(stamps) == 1:
            self.tasks.bench(t=stamps[0])
            self.sent += 1
        else:
            self._insert([{"t": t} for t in stamps])

    def unfinished(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM kv WHERE queue = ?", (self.huey.name,))
        done = row.fetchone()[0]
        return max(0, self.sent - int(done))

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        workers = concurrency or WORKERS
        argv = [
            python(),
            "-m",
            "huey.bin.huey_consumer",
            "bench.peers.huey_tasks.huey",
            "-k",
            "thread",
            "-w",
            str(workers),
            "-d",
            "0.01",
            "-m",
            "0.1",
            "-l",
            str(self.ctx.tmp / "huey-consumer.log"),
        ]
        return Worker(
            argv, {sink.SINK_ENV: str(self.ctx.sink), "DURQ_BENCH_HUEY_DB": str(self.path)}
        )
