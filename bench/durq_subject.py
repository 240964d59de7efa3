"""durq itself, on PostgreSQL and on SQLite, through its public API and `durq worker`."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from importlib.metadata import version
from typing import Any

import psycopg

import durq
from durq import EnqueueRequest

from . import pgdb, sink
from .measure import Worker, peak_rss_mb, python
from .subject import Subject

TASK = "bench.job"
CONCURRENCY = 100  # jobs in flight per worker process; claims are sized to free capacity
APP_SPEC = "bench.durq_tasks:app"

# Succeeded jobs, each attempt on its job row (no durq_attempts row), as the worker stores it.
RETAIN_PG = """
INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, worker_id,
                       run_at, created_at, updated_at, attempted_at, finished_at, runtime_ms)
SELECT 'default', 'bench.job', jsonb_build_object('n', g), 'succeeded', 1, 1, 'retained',
       now(), now(), now(), now(), now(), 0
FROM generate_series(1, %(count)s) AS g
"""
# Polled every 5 ms while a drain runs: each EXISTS reads one of durq's partial indexes
# (ready jobs; leases), so retained finished rows (W6) cost the poll nothing. Without the
# index conditions both were scans of the whole table, which took the drain's CPU.
UNFINISHED_SQL = (
    "SELECT (EXISTS (SELECT 1 FROM durq_jobs WHERE state IN ('queued', 'retry_wait')"
    " AND concurrency_key IS NULL))"
    " OR (EXISTS (SELECT 1 FROM durq_jobs WHERE lease_expires_at IS NOT NULL"
    " AND state = 'running'))"
)


class _Durq(Subject):
    family = "durq"
    url: str
    app: durq.App

    def versions(self) -> dict[str, str]:
        # libpq through psycopg's C build ("binary") or its pure-Python one ("python"):
        # the pure-Python one decodes rows several times slower.
        return {
            "durq": version("durq"),
            "psycopg": f"{psycopg.__version__} ({psycopg.pq.__impl__})",
        }

    def _app(self) -> durq.App:
        return durq.App(self.url)

    def enqueue_single(self, count: int) -> float:
        app = self.app
        start = time.perf_counter()
        for i in range(count):
            app.enqueue(TASK, {"n": i})
        return time.perf_counter() - start

    def enqueue_batches(self, count: int, batch: int) -> float:
        app = self.app
        start = time.perf_counter()
        for first in range(0, count, batch):
            # Ids only, as PgQueuer's batch enqueue answers (no Job object per row).
            items = [(TASK, {"n": i}) for i in range(first, min(count, first + batch))]
            app.enqueue_many(items, return_jobs=False)
        return time.perf_counter() - start

    def probe(self, stamps: list[float]) -> None:
        if len(stamps) == 1:
            self.app.enqueue(TASK, {"t": stamps[0]})
        else:
            self.app.enqueue_many([EnqueueRequest(TASK, {"t": t}) for t in stamps])

    def load(self, count: int) -> None:
        # Many statements, one transaction: every job becomes ready at the same commit.
        with self._loading_connection() as conn:
            for first in range(0, count, 5_000):
                items = [(TASK, {"n": i}) for i in range(first, min(count, first + 5_000))]
                self.app.enqueue_many(items, connection=conn)
            conn.commit()

    def _loading_connection(self) -> Any:
        raise NotImplementedError

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [
            python(),
            "-m",
            "durq.cli.main",
            "worker",
            "--app",
            APP_SPEC,
            "--processes",
            str(processes),
            "--log-level",
            "WARNING",  # no log line per job
        ]
        concurrency = concurrency or int(os.environ.get("DURQ_BENCH_CONCURRENCY", CONCURRENCY))
        argv += ["--concurrency", str(concurrency)]
        return Worker(argv, {"DURQ_DATABASE_URL": self.url, sink.SINK_ENV: str(self.ctx.sink)})


class DurqPostgres(_Durq):
    name = "durq-pg"
    backend = "postgresql"
    config_note = (
        f"durq worker --concurrency {CONCURRENCY} --log-level WARNING, async no-op task; "
        "synchronous_commit on; fenced, attempts recorded"
    )

    def setup(self) -> None:
        self.url = pgdb.create(self.ctx.endpoints.pg_admin_url, "durq")
        self.app = self._app()
        self.app.migrate()
        self.conn = psycopg.connect(self.url, autocommit=True)

    def teardown(self) -> None:
        self.app.close()
        self.conn.close()
        pgdb.drop(self.ctx.endpoints.pg_admin_url, self.url)

    def reset(self) -> None:
        self.conn.execute("TRUNCATE durq_jobs, durq_attempts, durq_artifacts, durq_idempotency")

    def _loading_connection(self) -> Any:
        return psycopg.connect(self.url)

    def unfinished(self) -> int:
        row = self.conn.execute(UNFINISHED_SQL).fetchone()
        return int(bool(row and row[0]))

    def retain_finished(self, count: int) -> None:
        self.conn.execute(RETAIN_PG, {"count": count})
        self.conn.execute("VACUUM ANALYZE durq_jobs")
        self.conn.execute("VACUUM ANALYZE durq_attempts")


class DurqSqlite(_Durq):
    name = "durq-sqlite"
    backend = "sqlite"
    config_note = (
        f"durq worker --concurrency {CONCURRENCY} --log-level WARNING, async no-op task; "
        "WAL, synchronous=FULL; fenced, attempts recorded"
    )

    def setup(self) -> None:
        self.path = self.ctx.tmp / f"durq-{os.getpid()}.db"
        self.url = f"sqlite:///{self.path}"
        self.app = self._app()
        self.app.migrate()
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)

    def teardown(self) -> None:
        self.app.close()
        self.conn.close()
        for suffix in ("", "-wal", "-shm"):
            path = self.path.with_name(self.path.name + suffix)
            path.unlink(missing_ok=True)

    def reset(self) -> None:
        for table in ("durq_attempts", "durq_artifacts", "durq_idempotency", "durq_jobs"):
            self.conn.execute(f"DELETE FROM {table}")

    def load(self, count: int) -> None:
        super().load(count)
        # The jobs were committed on the loading connection, which durq cannot see: say
        # so, as the README tells a user to, or the worker finds them at its next poll.
        self.app.wake()

    def _loading_connection(self) -> Any:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def unfinished(self) -> int:
        # Each EXISTS reads a partial index (waiting jobs; running ones): one EXISTS over
        # the three states scanned the table, past every finished row, every 5 ms.
        row = self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM durq_jobs WHERE state IN ('queued', 'retry_wait'))"
            " OR EXISTS (SELECT 1 FROM durq_jobs WHERE state = 'running')"
        ).fetchone()
        return int(row[0]) if row else 0

    def retain_finished(self, count: int) -> None:
        now = time.time()
        self.conn.execute("BEGIN")
        self.conn.execute(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) "
            "INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, "
            "worker_id, run_at, created_at, updated_at, attempted_at, finished_at, runtime_ms) "
            "SELECT 'default', 'bench.job', json_object('n', n), 'succeeded', 1, 1, "
            "'retained', ?, ?, ?, ?, ?, 0 FROM g",
            (count, now, now, now, now, now),
        )
        self.conn.execute("COMMIT")
        self.conn.execute("ANALYZE")


class _ThreadWorker:
    """durq's worker runtime in a thread of the benchmark process (SQLite's in-process
    wake-ups: an enqueue in this process wakes the idle worker without polling)."""

    def __init__(self, app: durq.App, concurrency: int) -> None:
        from durq._worker.runner import Worker as Runtime

        self.runtime = Runtime(app, concurrency=concurrency)
        self.thread = threading.Thread(
            target=self.runtime.run, kwargs={"install_signals": False}, daemon=True
        )
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def check(self) -> None:
        if not self.alive():
            raise RuntimeError("the in-process durq worker stopped")

    def peak_rss_mb(self) -> float:
        return peak_rss_mb(os.getpid())  # shared with the benchmark process itself

    def stop(self, timeout: float = 15.0) -> None:
        self.runtime.request_stop()
        self.thread.join(timeout)


class DurqSqliteInProcess(DurqSqlite):
    name = "durq-sqlite-inproc"
    workloads = frozenset({"W4"})
    config_note = "durq worker runtime in the enqueuing process (in-process wake-ups); SQLite"

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Any:
        os.environ[sink.SINK_ENV] = str(self.ctx.sink)
        if TASK not in self.app.tasks:
            self.app.task(name=TASK, max_attempts=3)(_bench_job)
        return _ThreadWorker(self.app, concurrency or CONCURRENCY)


async def _bench_job(n: int = 0, t: float | None = None) -> None:
    sink.record(t)
