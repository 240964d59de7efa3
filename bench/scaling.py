"""Scale-out on PostgreSQL: W3 with 1..N worker processes, direct and through PgBouncer in
transaction mode, and W5 with table bloat sampled (docs/scaling.md).

    python -m bench.scaling -o scaling.json
    python -m bench.scaling --jobs 2000 --processes 1,2 --bouncer-processes 8 --seconds 20

Each drain gets a database of its own (``durq_bench_scale_*``, dropped at the end). While
it runs, a separate connection samples ``pg_stat_activity`` and ``pg_locks`` every 100 ms;
the harness's own connections carry ``application_name`` ``durq-scale-harness`` and are
not counted. jobs/s is N over the span from the first ``attempted_at`` to the last
``finished_at`` in ``durq_jobs``. Prints one JSON object (and writes it with ``-o``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from . import pgdb
from .bouncer import interrupt, pgbouncer, pools, shielded, through
from .config import Endpoints, Sizes
from .durq_subject import APP_SPEC, CONCURRENCY, DurqPostgres
from .measure import Worker, cpu_seconds, emit, postgres_cpu_seconds, python, wait_until
from .subject import Context
from .workloads import w5_steady

HARNESS = "durq-scale-harness"  # application_name of the harness's own connections
WORKERS = "durq-scale-worker"
SAMPLE_SQL = """
SELECT count(*) FILTER (WHERE application_name IS DISTINCT FROM %(me)s),
       count(*) FILTER (WHERE wait_event_type = 'Lock'),
       (SELECT count(*) FROM pg_locks l JOIN pg_stat_activity b USING (pid)
         WHERE NOT l.granted AND b.datname = %(db)s)
FROM pg_stat_activity WHERE datname = %(db)s
"""
BLOAT_SQL = """
SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count,
       last_autovacuum, pg_total_relation_size(relid) AS total_bytes
FROM pg_stat_user_tables WHERE relname IN ('durq_jobs', 'durq_attempts') ORDER BY relname
"""
SETTINGS_SQL = """
SELECT name, setting FROM pg_settings
WHERE name IN ('server_version', 'max_connections', 'autovacuum', 'autovacuum_naptime',
               'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor',
               'autovacuum_vacuum_insert_threshold', 'autovacuum_vacuum_insert_scale_factor',
               'autovacuum_vacuum_cost_limit', 'autovacuum_vacuum_cost_delay',
               'synchronous_commit', 'shared_buffers')
"""
SPAN_SQL = """
SELECT count(*), extract(epoch FROM max(finished_at) - min(attempted_at))::float8
FROM durq_jobs WHERE state = 'succeeded'
"""
Row = dict[str, Any]


def _log(message: str) -> None:
    print(f"[scaling] {message}", file=sys.stderr, flush=True)


def _dbname(url: str) -> str:
    return url.rpartition("/")[2]


@contextmanager
def harness(prefix: str) -> Iterator[Context]:
    """A drain harness's context: its own connections named (the samples count only the
    workers'), a scratch folder for the workers' logs and sink, removed at the end."""
    os.environ["PGAPPNAME"] = HARNESS
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["DURQ_BENCH_TMP"] = str(tmp)  # worker logs
    (tmp / "sink").mkdir()
    try:
        yield Context(endpoints=Endpoints(), tmp=tmp, sink=tmp / "sink")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def header(ctx: Context, argv: list[str] | None) -> Row:
    """What every harness's JSON starts with: when, on how many cores, which versions, how."""
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "versions": DurqPostgres(ctx).versions(),
        "argv": sys.argv[1:] if argv is None else argv,
    }


class Sampler:
    """Calls ``sample()`` every ``interval`` seconds in a thread, keeping each answer."""

    def __init__(self, sample: Callable[[], Row], interval: float) -> None:
        self.sample, self.interval = sample, interval
        self.rows: list[Row] = []
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="scale-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                row = self.sample()
            except Exception as exc:  # raised again by stop()
                self.error = exc
                return
            self.rows.append({"t": round(time.perf_counter() - self._start, 2), **row})
            self._stop.wait(self.interval)

    def stop(self) -> list[Row]:
        """Stops sampling and takes one last sample."""
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error
        self.rows.append({"t": round(time.perf_counter() - self._start, 2), **self.sample()})
        return self.rows


def _stats(rows: list[Row], key: str) -> dict[str, float]:
    values = [r[key] for r in rows] or [0]
    return {"max": max(values), "mean": round(statistics.fmean(values), 3)}


# ---- W3: drain N jobs with P worker processes ------------------------------------------


def start_workers(url: str, processes: int, concurrency: int, env: dict[str, str]) -> Worker:
    options = f"--processes {processes} --concurrency {concurrency} --log-level WARNING"
    argv = [python(), "-m", "durq.cli.main", "worker", "--app", APP_SPEC, *options.split()]
    return Worker(argv, {"DURQ_DATABASE_URL": url, "PGAPPNAME": WORKERS, **env})


def drain(
    ctx: Context,
    jobs: int,
    processes: int,
    concurrency: int,
    bouncer: str | None = None,
    worker_env: dict[str, str] | None = None,
) -> Row:
    s = DurqPostgres(ctx)
    s.setup()  # a fresh database, migrated
    admin = bouncer_admin = worker = None
    try:
        admin = psycopg.connect(ctx.endpoints.pg_admin_url, autocommit=True)
        db = _dbname(s.url)
        url, env = s.url, {}
        if bouncer is not None:
            url, env = through(s.url, bouncer), {"DURQ_PGBOUNCER": "true"}
            # The admin console speaks the simple query protocol only: never prepare.
            bouncer_admin = psycopg.connect(
                through(pgdb.url_for(s.url, "pgbouncer"), bouncer),
                autocommit=True,
                prepare_threshold=None,
            )

        def sample() -> Row:
            assert admin is not None
            row = admin.execute(SAMPLE_SQL, {"db": db, "me": HARNESS}).fetchone()
            assert row is not None
            out = {"server": int(row[0]), "lock_waits": int(row[1]), "ungranted": int(row[2])}
            return out | (pools(bouncer_admin, db) if bouncer_admin is not None else {})

        worker = start_workers(url, processes, concurrency, env | (worker_env or {}))
        ready_sql = "SELECT count(*) FROM durq_workers WHERE stopped_at IS NULL"

        def ready() -> bool:
            worker.check()
            row = s.conn.execute(ready_sql).fetchone()
            return bool(row and row[0] >= processes)

        wait_until(ready, timeout=180, interval=0.1, what="the worker processes to register")
        time.sleep(1.5)  # LISTEN in place, first empty claims and maintenance ticks done
        idle = sample()
        sampler = Sampler(sample, 0.1)
        cpu_before = (cpu_seconds(worker.proc.pid), postgres_cpu_seconds())
        started = time.perf_counter()
        s.load(jobs)  # one transaction: every job becomes ready at the same commit

        def drained() -> bool:
            worker.check()
            return s.unfinished() == 0

        wait_until(drained, timeout=900, interval=0.05, what="the drain")
        wall = time.perf_counter() - started
        cpu_after = (cpu_seconds(worker.proc.pid), postgres_cpu_seconds())
        rows = sampler.stop()
        done, span = s.conn.execute(SPAN_SQL).fetchone() or (0, None)
        if done != jobs or not span:
            raise RuntimeError(f"{done} of {jobs} jobs succeeded")
        server = max(r["server"] for r in rows)
        out: Row = {
            "processes": processes,
            "concurrency": concurrency,
            "jobs": jobs,
            "jobs_per_s": round(jobs / span, 1),
            "span_s": round(span, 3),
            "wall_s": round(wall, 3),
            "server_connections": server,
            "server_connections_idle": idle["server"],
            "lock_waits": _stats(rows, "lock_waits"),
            "ungranted_locks": _stats(rows, "ungranted"),
            "samples": len(rows),
            # CPU per job over the drain: the worker processes, and every postgres process
            # on the machine (the loading transaction included).
            "worker_cpu_us_per_job": round((cpu_after[0] - cpu_before[0]) / jobs * 1e6, 1),
            "postgres_cpu_us_per_job": round((cpu_after[1] - cpu_before[1]) / jobs * 1e6, 1),
        }
        if bouncer_admin is None:
            out["connections_per_process"] = round(server / processes, 2)
            out["connections_per_process_idle"] = round(idle["server"] / processes, 2)
        else:
            clients = max(r["clients"] for r in rows)
            out |= {
                "client_connections": clients,
                "client_connections_idle": idle["clients"],
                "bouncer_server_connections": max(r["bouncer_servers"] for r in rows),
                "connections_per_process": round(clients / processes, 2),
                "clients_waiting": _stats(rows, "clients_waiting"),
            }
        return out
    finally:
        with shielded():
            if worker is not None:
                worker.stop(60)
            for conn in (admin, bouncer_admin):
                if conn is not None:
                    conn.close()
            s.teardown()


# ---- W5: steady state, with durq_jobs and durq_attempts sampled ------------------------


class _Fresh(DurqPostgres):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.workers: list[Worker] = []

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        self.workers.append(super().start_worker(processes=processes, concurrency=concurrency))
        return self.workers[-1]

    def reset(self) -> None:
        """Nothing to remove: the database is new. (A TRUNCATE here would also reset the
        table's statistics whenever its backend next reports them, up to 10 s later, in the
        middle of the samples.)"""


def steady(ctx: Context, rate: float, seconds: float, every: float) -> Row:
    s = _Fresh(ctx)
    s.setup()
    try:
        conn = psycopg.connect(s.url, autocommit=True)

        def bloat() -> Row:
            cur = conn.execute(BLOAT_SQL)
            names = [d.name for d in cur.description or []]
            tables = {}
            for row in cur.fetchall():
                table = dict(zip(names, row, strict=True))
                last = table.pop("last_autovacuum")
                table["last_autovacuum"] = last.isoformat() if last else None
                tables[table.pop("relname")] = table
            return tables

        sampler = Sampler(bloat, every)
        try:
            metrics = w5_steady(s, Sizes(steady_rate=rate, steady_seconds=seconds))
        finally:
            samples = sampler.stop()
            conn.close()
        return {
            "processes": 1,
            "concurrency": int(os.environ.get("DURQ_BENCH_CONCURRENCY", CONCURRENCY)),
            "offered_per_s": rate,
            "seconds": seconds,
            "sample_every_s": every,
            "metrics": metrics,
            "samples": samples,
        }
    finally:
        with shielded():
            for worker in s.workers:
                worker.stop(60)  # stopped already unless interrupted
            s.teardown()


# ---- command line ----------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=20_000, help="jobs per drain (default 20000)")
    p.add_argument("--processes", type=_ints, default=[1, 2, 4], help="direct: 1,2,4")
    p.add_argument("--concurrency", type=int, default=CONCURRENCY, help="direct, per process")
    p.add_argument("--bouncer-processes", type=_ints, default=[8, 16], help="PgBouncer: 8,16")
    p.add_argument("--bouncer-concurrency", type=int, default=20, help="PgBouncer, per process")
    p.add_argument("--pool-size", type=int, default=20, help="PgBouncer default_pool_size")
    p.add_argument("--rate", type=float, default=1_000.0, help="W5 offered jobs/s")
    p.add_argument("--seconds", type=float, default=300.0, help="W5 duration (0: skip W5)")
    p.add_argument("--sample-every", type=float, default=10.0, help="W5 table samples, s")
    p.add_argument("-o", "--output", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    with harness("durq-scale-") as ctx:
        with psycopg.connect(ctx.endpoints.pg_admin_url) as conn:
            server: dict[str, str] = dict(conn.execute(SETTINGS_SQL).fetchall())
        version = subprocess.run(
            [shutil.which("pgbouncer") or "/usr/sbin/pgbouncer", "--version"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split("\n")[0]
        result: Row = header(ctx, argv) | {
            "postgresql": server,  # W5's autovacuum figures depend on these
            "pgbouncer": version,
        }
        direct = result["w3_direct"] = []
        for n in args.processes:
            _log(f"W3 direct: {args.jobs} jobs, {n} process(es) x {args.concurrency}")
            direct.append(drain(ctx, args.jobs, n, args.concurrency))
            _log(json.dumps(direct[-1]))
        if args.bouncer_processes:
            runs: list[Row] = []
            result["w3_pgbouncer"] = {
                "pool_mode": "transaction",
                "default_pool_size": args.pool_size,
                "concurrency": args.bouncer_concurrency,
                "runs": runs,
            }
            with pgbouncer(ctx.endpoints.pg_admin_url, args.pool_size) as hostport:
                for n in args.bouncer_processes:
                    _log(
                        f"W3 PgBouncer: {args.jobs} jobs, {n} processes x "
                        f"{args.bouncer_concurrency}, pool {args.pool_size}"
                    )
                    runs.append(drain(ctx, args.jobs, n, args.bouncer_concurrency, hostport))
                    _log(json.dumps(runs[-1]))
        if args.seconds > 0:
            if server.get("autovacuum") != "on":
                _log("autovacuum is off on this server: W5 will show no autovacuum runs")
            _log(f"W5: {args.rate:g} jobs/s for {args.seconds:g} s, 1 worker process")
            result["w5"] = steady(ctx, args.rate, args.seconds, args.sample_every)
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
