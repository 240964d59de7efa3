"""The worker's prefetch buffer, priced: W3 drains (one worker process, PostgreSQL) of jobs
that each await a few milliseconds, as jobs waiting on I/O do, with ``--prefetch 0`` and
with the default, alternating in one run.

    python -m bench.prefetch -o prefetch.json
    python -m bench.prefetch --jobs 20000 --task-ms 5 --runs 3 --prefetch 0,100

Each drain is :func:`bench.scaling.drain` (a fresh database; jobs/s over the span from the
first ``attempted_at`` to the last ``finished_at``). Prints one JSON object with every
drain and the median jobs/s per setting (and writes it with ``-o``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from .durq_subject import CONCURRENCY
from .measure import emit
from .scaling import drain, harness, header


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.prefetch", description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=20_000, help="jobs per drain (default 20000)")
    p.add_argument("--task-ms", type=float, default=5.0, help="each job awaits this long")
    p.add_argument("--concurrency", type=int, default=CONCURRENCY, help="worker concurrency")
    p.add_argument("--prefetch", type=_ints, default=[0, 100], help="settings to compare")
    p.add_argument("--runs", type=int, default=3, help="drains per setting")
    p.add_argument("-o", "--output", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)

    drains: dict[int, list[dict[str, Any]]] = {n: [] for n in args.prefetch}
    with harness("durq-prefetch-") as ctx:
        for run in range(args.runs):
            for n in args.prefetch:  # alternating: the machine's drift spreads over both
                env = {"DURQ_PREFETCH": str(n), "DURQ_BENCH_TASK_MS": str(args.task_ms)}
                row = drain(ctx, args.jobs, 1, args.concurrency, worker_env=env)
                drains[n].append(row)
                print(
                    f"[prefetch] run {run + 1}, --prefetch {n}: {row['jobs_per_s']} jobs/s",
                    file=sys.stderr,
                    flush=True,
                )
        result = header(ctx, argv) | {
            "task_ms": args.task_ms,
            "concurrency": args.concurrency,
            "median_jobs_per_s": {
                str(n): statistics.median(r["jobs_per_s"] for r in rows)
                for n, rows in drains.items()
            },
            "drains": {str(n): rows for n, rows in drains.items()},
        }
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
