"""The PostgreSQL ceiling: what psycopg 3 and plain SQL allow, with no queue library.

One ``UPDATE … FOR UPDATE SKIP LOCKED … RETURNING`` claims 100 jobs, one batch ``UPDATE``
completes them, COPY loads batches, and LISTEN/NOTIFY wakes an idle worker. No fencing,
no attempt records, no leases: the floor under any queue's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import psycopg

from .. import pgdb, sink
from ..measure import Worker, python
from ..subject import Subject

SCHEMA = """
CREATE TABLE raw_jobs (
    id            BIGSERIAL PRIMARY KEY,
    queue         TEXT NOT NULL DEFAULT 'default',
    args          JSONB NOT NULL,
    state         TEXT NOT NULL DEFAULT 'queued',
    run_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempt       INTEGER NOT NULL DEFAULT 0,
    worker_id     TEXT,
    attempted_at  TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX raw_jobs_ready_idx ON raw_jobs (queue, run_at, id) WHERE state = 'queued';
CREATE INDEX raw_jobs_running_idx ON raw_jobs (id) WHERE state = 'running';
"""

INSERT_NOTIFY = (
    "WITH ins AS (INSERT INTO raw_jobs (args) VALUES (%s) RETURNING queue) "
    "SELECT pg_notify('raw_jobs', queue) FROM ins"
)
INSERT_ONLY = "INSERT INTO raw_jobs (args) VALUES (%s)"
CLAIM = """
UPDATE raw_jobs SET state = 'running', attempt = attempt + 1, attempted_at = now(),
       worker_id = %(worker)s
WHERE id IN (
    SELECT id FROM raw_jobs
    WHERE state = 'queued' AND queue = 'default' AND run_at <= now()
    ORDER BY run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING id, args
"""
COMPLETE = "UPDATE raw_jobs SET state = 'succeeded', finished_at = now() WHERE id = ANY(%s)"
UNFINISHED = (
    "SELECT (EXISTS (SELECT 1 FROM raw_jobs WHERE state = 'queued'))::int"
    " + (EXISTS (SELECT 1 FROM raw_jobs WHERE state = 'running'))::int"
)


class RawPostgres(Subject):
    name = "raw-sql-pg"
    backend = "postgresql"
    family = "ceiling"
    config_note = (
        "psycopg 3, autocommit; claim 100 with one UPDATE … SKIP LOCKED … RETURNING, "
        "complete with one UPDATE … = ANY(ids); COPY for batches; LISTEN/NOTIFY wake-ups"
    )

    def versions(self) -> dict[str, str]:
        return {"psycopg": psycopg.__version__}

    def setup(self) -> None:
        self.url = pgdb.create(self.ctx.endpoints.pg_admin_url, "raw")
        self.conn = psycopg.connect(self.url, autocommit=True)
        self.conn.execute(SCHEMA)

    def teardown(self) -> None:
        self.conn.close()
        pgdb.drop(self.ctx.endpoints.pg_admin_url, self.url)

    def reset(self) -> None:
        self.conn.execute("TRUNCATE raw_jobs")

    def enqueue_single(self, count: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            self.conn.execute(INSERT_NOTIFY, (json.dumps({"n": i}),))
        return time.perf_counter() - start

    def enqueue_single_insert_only(self, count: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            self.conn.execute(INSERT_ONLY, (json.dumps({"n": i}),))
        return time.perf_counter() - start

    def _copy(self, args: list[dict[str, Any]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            with cur.copy("COPY raw_jobs (args) FROM STDIN") as copy:
                for item in args:
                    copy.write_row((json.dumps(item),))
            cur.execute("SELECT pg_notify('raw_jobs', 'default')")

    def enqueue_batches(self, count: int, batch: int) -> float:
        start = time.perf_counter()
        for first in range(0, count, batch):
            self._copy([{"n": i} for i in range(first, min(count, first + batch))])
        return time.perf_counter() - start

    def load(self, count: int) -> None:
        self._copy([{"n": i} for i in range(count)])

    def probe(self, stamps: list[float]) -> None:
        if len(stamps) == 1:
            self.conn.execute(INSERT_NOTIFY, (json.dumps({"t": stamps[0]}),))
        else:
            self._copy([{"t": t} for t in stamps])

    def unfinished(self) -> int:
        row = self.conn.execute(UNFINISHED).fetchone()
        return int(row[0]) if row else 0

    def retain_finished(self, count: int) -> None:
        self.conn.execute(
            "INSERT INTO raw_jobs (args, state, attempt, attempted_at, finished_at) "
            "SELECT jsonb_build_object('n', g), 'succeeded', 1, now(), now() "
            "FROM generate_series(1, %s) AS g",
            (count,),
        )
        self.conn.execute("VACUUM ANALYZE raw_jobs")

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [python(), "-m", "bench.peers.raw_pg", "worker", self.url, str(processes)]
        return Worker(argv, {sink.SINK_ENV: str(self.ctx.sink)})


def work(url: str, stop: Any) -> None:
    """Claim 100, run them, complete them in one statement; sleep on LISTEN when idle."""
    worker_id = f"raw:{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("LISTEN raw_jobs")
        while not stop.is_set():
            rows = conn.execute(CLAIM, {"worker": worker_id, "limit": 100}).fetchall()
            if not rows:
                for _ in conn.notifies(timeout=0.5, stop_after=1):
                    pass
                continue
            for _, args in rows:
                sink.record(args.get("t"))
            conn.execute(COMPLETE, ([r[0] for r in rows],))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("url")
    parser.add_argument("processes", type=int)
    ns = parser.parse_args()
    from ..procs import run_processes

    run_processes(work, (ns.url,), ns.processes)


if __name__ == "__main__":
    main()
