"""Single enqueues from many threads on PostgreSQL, their NOTIFYs shared (durq's default
5 ms window) or one per enqueue (window 0), alternating in one run.

    python -m bench.notify -o notify.json
    python -m bench.notify --threads 8 --jobs 300 --runs 3

PostgreSQL commits the transactions that sent a NOTIFY one at a time, so enqueuers that
each notify wait on one another. Each round uses a fresh database (``durq_bench_notify_*``,
dropped at the end). Prints one JSON object (and writes it with ``-o``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import durq
from durq._engine.notices import WINDOW, Notices

from . import pgdb
from .config import Endpoints
from .measure import emit


def _round(admin_url: str, threads: int, jobs: int, window: float) -> dict[str, Any]:
    url = pgdb.create(admin_url, "notify")
    app = durq.App(settings=durq.Settings(database_url=url, pool_max_size=threads + 2))
    try:
        app.migrate()
        notices = app._notices = Notices(app.driver, window=window)  # the setting under test
        app.enqueue("bench.job", {"n": -1})  # connections open, statements prepared

        def enqueue() -> None:
            for n in range(jobs):
                app.enqueue("bench.job", {"n": n})

        workers = [threading.Thread(target=enqueue) for _ in range(threads)]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - started
        app.close()  # sends what is owed
        return {
            "window_ms": window * 1000,
            "enqueues_per_s": round(threads * jobs / elapsed, 1),
            "notifies": notices.sent,
        }
    finally:
        app.close()
        pgdb.drop(admin_url, url)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.notify", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=8, help="enqueuing threads (default 8)")
    p.add_argument("--jobs", type=int, default=300, help="single enqueues per thread")
    p.add_argument("--runs", type=int, default=3, help="rounds per setting")
    p.add_argument("-o", "--output", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    admin_url = Endpoints().pg_admin_url
    windows = {"off": 0.0, "default": WINDOW}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in windows}
    for _ in range(args.runs):
        for name, window in windows.items():  # alternating: drift spreads over both
            row = _round(admin_url, args.threads, args.jobs, window)
            rounds[name].append(row)
            print(f"[notify] {json.dumps(row)}", file=sys.stderr, flush=True)
    result = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "argv": sys.argv[1:] if argv is None else argv,
        "threads": args.threads,
        "jobs_per_thread": args.jobs,
        "median_enqueues_per_s": {
            window: statistics.median(r["enqueues_per_s"] for r in rows)
            for window, rows in rounds.items()
        },
        "rounds": rounds,
    }
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
