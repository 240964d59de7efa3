"""The dashboard's overview at scale: its response time with N retained jobs (PostgreSQL).

    python -m bench.dashboard_overview --rows 1000000 [--requests 100]

Loads N finished jobs (95 % succeeded, 5 % dead-lettered, created over the last 24 hours,
one attempt each) across four queues, plus 2,000 waiting and 40 running jobs, into a
throwaway database; rolls the last hour up as maintenance does; then serves it with a real
``durq serve`` and times ``GET /ui/overview/panel`` (what the page polls) and ``GET /ui/``
over HTTP, and ``App.overview()`` in process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg

import durq
from durq._maintenance import rollup
from durq.api.keys import KeyService

from . import pgdb

ROOT = Path(__file__).resolve().parents[1]
QUEUES = ["default", "mail", "images", "reports"]

LOAD = """
INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, run_at,
                       created_at, updated_at, attempted_at, finished_at, result,
                       last_error_code, worker_id, runtime_ms)
SELECT (ARRAY['default', 'mail', 'images', 'reports'])[1 + g %% 4], 'bench.task',
       jsonb_build_object('n', g),
       CASE WHEN g %% 20 = 0 THEN 'dead_letter' ELSE 'succeeded' END, 1, 1,
       t, t, t + interval '1 second', t + interval '50 milliseconds', t + interval '1 second',
       CASE WHEN g %% 20 = 0 THEN NULL ELSE '{"ok": true}'::jsonb END,
       CASE WHEN g %% 20 = 0 THEN 'E_BENCH' END, 'bench-worker', 950
FROM (SELECT g, now() - (g %% 86400) * interval '1 second' AS t
      FROM generate_series(CAST(%(first)s AS bigint), CAST(%(last)s AS bigint)) AS g) s
"""
# A succeeded attempt lives on its job row; a failed one has its own record.
ATTEMPTS = """
INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                           finished_at, runtime_ms, outcome, error_code)
SELECT id, 1, 1, 'bench-worker', attempted_at, finished_at, 950, 'failed', last_error_code
FROM durq_jobs WHERE id BETWEEN %(first)s AND %(last)s AND state = 'dead_letter'
"""
LIVE = """
INSERT INTO durq_jobs (queue, task, args, state, run_at, worker_id, attempt, claim_version,
                       lease_expires_at, heartbeat_at)
SELECT (ARRAY['default', 'mail', 'images', 'reports'])[1 + g %% 4], 'bench.task', '{}',
       CASE WHEN g <= 40 THEN 'running' ELSE 'queued' END, now() - (g %% 120) * interval '1 second',
       CASE WHEN g <= 40 THEN 'bench-worker' END, CASE WHEN g <= 40 THEN 1 ELSE 0 END,
       CASE WHEN g <= 40 THEN 1 ELSE 0 END,
       CASE WHEN g <= 40 THEN now() + interval '30 seconds' END,
       CASE WHEN g <= 40 THEN now() END
FROM generate_series(1, 2040) AS g
"""


def load(url: str, rows: int, batch: int = 250_000) -> float:
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        for first in range(1, rows + 1, batch):
            last = min(rows, first + batch - 1)
            conn.execute(LOAD, {"first": first, "last": last})
            conn.execute(ATTEMPTS, {"first": first, "last": last})
        conn.execute(LIVE, {})
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - t0


def timings(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def serve(url: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DURQ_DATABASE_URL": url,
        "DURQ_API_RATE_LIMIT_PER_SECOND": "0",
        "DURQ_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "durq.cli.main", "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def measure(url: str, requests: int, port: int) -> dict[str, object]:
    app = durq.App(url)
    _, key = KeyService(app).create("bench", "operator")
    t0 = time.perf_counter()
    rollup.run_once(app.driver, None)
    rollup_s = time.perf_counter() - t0
    in_process = []
    for _ in range(requests):
        t0 = time.perf_counter()
        app.overview()
        in_process.append(time.perf_counter() - t0)
    proc = serve(url, port)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("durq serve did not start")
                time.sleep(0.1)
            client.post("/ui/login", data={"api_key": key})
            results: dict[str, list[float]] = {"/ui/overview/panel": [], "/ui/": []}
            for path, samples in results.items():
                client.get(path)  # warm up
                for _ in range(requests):
                    t0 = time.perf_counter()
                    response = client.get(path)
                    samples.append(time.perf_counter() - t0)
                    assert response.status_code == 200, response.text[:300]
    finally:
        proc.terminate()
        proc.wait(20)
        app.close()
    return {
        "rollup_s": round(rollup_s, 3),
        "overview_in_process": timings(in_process),
        **{f"GET {path}": timings(samples) for path, samples in results.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="retained finished jobs")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per URL")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "DURQ_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    args = parser.parse_args()
    url = pgdb.create(args.admin_url, "ui")
    try:
        durq.App(url).migrate()
        load_s = load(url, args.rows)
        report = {
            "date": datetime.now(UTC).date().isoformat(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "retained_jobs": args.rows,
            "load_s": round(load_s, 1),
            **measure(url, args.requests, args.port),
        }
    finally:
        pgdb.drop(args.admin_url, url)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
