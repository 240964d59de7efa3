"""The SQLite ceiling: plain sqlite3, WAL and synchronous=FULL like durq's default.

One write transaction claims 100 jobs (``UPDATE … WHERE id IN (SELECT … LIMIT 100)
RETURNING``), one completes them; an idle worker polls every millisecond.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from typing import Any

from .. import sink
from ..measure import Worker, python
from ..subject import Subject

SCHEMA = """
CREATE TABLE IF NOT EXISTS raw_jobs (
    id            INTEGER PRIMARY KEY,
    queue         TEXT NOT NULL DEFAULT 'default',
    args          TEXT NOT NULL,
    state         TEXT NOT NULL DEFAULT 'queued',
    run_at        REAL NOT NULL,
    attempt       INTEGER NOT NULL DEFAULT 0,
    worker_id     TEXT,
    attempted_at  REAL,
    finished_at   REAL,
    created_at    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS raw_jobs_ready_idx ON raw_jobs (queue, run_at, id)
    WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS raw_jobs_running_idx ON raw_jobs (id) WHERE state = 'running';
"""
INSERT = "INSERT INTO raw_jobs (args, run_at, created_at) VALUES (?, ?, ?)"
CLAIM = """
UPDATE raw_jobs SET state = 'running', attempt = attempt + 1, attempted_at = ?1,
       worker_id = ?2
WHERE id IN (SELECT id FROM raw_jobs WHERE state = 'queued' AND queue = 'default'
             AND run_at <= ?1 ORDER BY run_at, id LIMIT 100)
RETURNING id, args
"""


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


class RawSqlite(Subject):
    name = "raw-sqlite"
    backend = "sqlite"
    family = "ceiling"
    config_note = (
        "sqlite3, WAL, synchronous=FULL; claim 100 per write transaction, complete 100 per "
        "write transaction; idle worker polls every 1 ms"
    )

    def versions(self) -> dict[str, str]:
        return {"sqlite": sqlite3.sqlite_version}

    def setup(self) -> None:
        self.path = str(self.ctx.tmp / "raw.db")
        self.conn = connect(self.path)
        self.conn.executescript(SCHEMA)

    def teardown(self) -> None:
        self.conn.close()

    def reset(self) -> None:
        self.conn.execute("DELETE FROM raw_jobs")

    def enqueue_single(self, count: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            now = time.time()
            self.conn.execute(INSERT, (json.dumps({"n": i}), now, now))
        return time.perf_counter() - start

    def _many(self, args: list[dict[str, Any]]) -> None:
        now = time.time()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(INSERT, [(json.dumps(a), now, now) for a in args])
        self.conn.execute("COMMIT")

    def enqueue_batches(self, count: int, batch: int) -> float:
        start = time.perf_counter()
        for first in range(0, count, batch):
            self._many([{"n": i} for i in range(first, min(count, first + batch))])
        return time.perf_counter() - start

    def load(self, count: int) -> None:
        self._many([{"n": i} for i in range(count)])

    def probe(self, stamps: list[float]) -> None:
        self._many([{"t": t} for t in stamps])

    def unfinished(self) -> int:
        row = self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM raw_jobs WHERE state IN ('queued', 'running'))"
        ).fetchone()
        return int(row[0]) if row else 0

    def retain_finished(self, count: int) -> None:
        now = time.time()
        self.conn.execute("BEGIN")
        self.conn.execute(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) "
            "INSERT INTO raw_jobs (args, state, run_at, created_at, finished_at) "
            "SELECT json_object('n', n), 'succeeded', ?, ?, ? FROM g",
            (count, now, now, now),
        )
        self.conn.execute("COMMIT")
        self.conn.execute("ANALYZE")

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [python(), "-m", "bench.peers.raw_sqlite", "worker", self.path, str(processes)]
        return Worker(argv, {sink.SINK_ENV: str(self.ctx.sink)})


def work(path: str, stop: Any) -> None:
    worker_id = f"raw:{os.getpid()}"
    conn = connect(path)
    while not stop.is_set():
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(CLAIM, (time.time(), worker_id)).fetchall()
        conn.execute("COMMIT")
        if not rows:
            time.sleep(0.001)
            continue
        for _, args in rows:
            sink.record(json.loads(args).get("t"))
        ids = json.dumps([r[0] for r in rows])
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE raw_jobs SET state = 'succeeded', finished_at = ? "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (time.time(), ids),
        )
        conn.execute("COMMIT")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("path")
    parser.add_argument("processes", type=int)
    ns = parser.parse_args()
    from ..procs import run_processes

    run_processes(work, (ns.path,), ns.processes)


if __name__ == "__main__":
    main()
