"""``durq bench``: the benchmark workloads, durq alone or beside its peers.

The workloads live in the ``bench/`` folder of a source checkout (they are not installed
with the package); the peers come with the ``bench`` extra.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import typer

from .common import EXIT_USAGE, fail

__all__ = ["bench"]


def _bench_runner() -> Any:
    """Import ``bench.runner`` from the checkout this durq runs from, or from the cwd."""
    candidates = [Path.cwd(), Path(__file__).resolve().parents[3]]
    for root in candidates:
        if (root / "bench" / "runner.py").is_file():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            return importlib.import_module("bench.runner")
    fail(
        "durq bench needs the bench/ folder of a durq source checkout: run it from the "
        "checkout's root (pip install -e '.[bench]' installs the peers)",
        EXIT_USAGE,
    )


def bench(
    compare: bool = typer.Option(
        False, "--compare", help="Also run the peers (PgQueuer, Procrastinate, Celery, Huey)."
    ),
    workload: list[str] = typer.Option(
        [], "--workload", "-w", help="W1 W2 W3 W3x2 W4 W5 W6 RSS; repeat for several."
    ),
    subject: list[str] = typer.Option(
        [], "--subject", "-s", help="Only these subjects (e.g. durq-pg, pgqueuer)."
    ),
    full: bool = typer.Option(False, "--full", help="The full sizes (1M rows, 30 s, ...)."),
    runs: int = typer.Option(0, "--runs", min=0, help="Repetitions (default 3)."),
    json_out: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Also write the JSON here."),
) -> None:
    """Measure enqueue, drain, latency, steady state, scale and worker memory.

    Uses its own databases (durq_bench_*) on DURQ_BENCH_PG_URL (default the local
    server) and Redis database 15 for Celery; medians of the runs, ratios within the run.
    """
    runner = _bench_runner()
    known = set(runner.WORKLOADS)
    bad = [w for w in workload if w not in known]
    if bad:
        fail(f"unknown workload {bad}; choose from {sorted(known)}", EXIT_USAGE)
    command = "durq bench " + " ".join(sys.argv[2:])
    report = runner.run_cli(
        compare=compare,
        full=full,
        workloads=workload or None,
        subjects=subject or None,
        runs=runs or None,
        command=command.strip(),
        quiet=json_out,
    )
    text = runner.dumps(report)
    if output is not None:
        output.write_text(text + "\n")
    if json_out:
        typer.echo(text)
    else:
        importlib.import_module("bench.report").print_report(report)
