"""Run the workloads over the subjects, interleaved, and summarise medians and ratios."""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import pgdb
from .config import FULL, QUICK, Endpoints, Sizes
from .measure import median
from .subject import Context, Subject
from .workloads import WORKLOADS

# name → "module:Class"; peers are imported only when selected, so a missing extra only
# skips that peer.
SUBJECTS: dict[str, str] = {
    "durq-pg": "bench.durq_subject:DurqPostgres",
    "durq-sqlite": "bench.durq_subject:DurqSqlite",
    "durq-sqlite-inproc": "bench.durq_subject:DurqSqliteInProcess",
    "durq-pg-breakers": "bench.durq_variants:DurqPostgresBreakers",
    "durq-pg-webhooks": "bench.durq_variants:DurqPostgresWebhooks",
    "durq-pg-defaults": "bench.durq_variants:DurqPostgresDefaults",
    "raw-sql-pg": "bench.peers.raw_pg:RawPostgres",
    "raw-sqlite": "bench.peers.raw_sqlite:RawSqlite",
    "pgqueuer": "bench.peers.pgqueuer_peer:PgQueuerPeer",
    "pgqueuer-defaults": "bench.peers.pgqueuer_peer:PgQueuerDefaults",
    "procrastinate": "bench.peers.procrastinate_peer:ProcrastinatePeer",
    "celery-redis": "bench.peers.celery_peer:CeleryPeer",
    "huey-sqlite": "bench.peers.huey_peer:HueyPeer",
}
DURQ_ONLY = ["durq-pg", "durq-sqlite", "durq-sqlite-inproc", "raw-sql-pg", "raw-sqlite"]

# The headline metric of each workload, and whether larger is better.
HEADLINE = {
    "W1": ("jobs_per_s", True),
    "W2": ("jobs_per_s", True),
    "W3": ("jobs_per_s", True),
    "W3x2": ("jobs_per_s", True),
    "W4": ("p99_ms", False),
    "W5": ("jobs_per_s", True),
    "W6": ("retained_jobs_per_s", True),
    "RSS": ("peak_rss_mb", False),
}


def load_subject(name: str, ctx: Context) -> Subject:
    module_name, _, cls_name = SUBJECTS[name].partition(":")
    module = importlib.import_module(module_name)
    cls: type[Subject] = getattr(module, cls_name)
    return cls(ctx)


def run(
    *,
    subjects: Sequence[str],
    workloads: Sequence[str],
    sizes: Sizes,
    mode: str,
    command: str,
    progress: Any = print,
) -> dict[str, Any]:
    endpoints = Endpoints()
    _stop_on_sigterm()
    pgdb.drop_leftovers(endpoints.pg_admin_url)
    tmp = Path(tempfile.mkdtemp(prefix="durq-bench-"))
    os.environ["DURQ_BENCH_TMP"] = str(tmp)
    sink_dir = tmp / "sink"
    sink_dir.mkdir()
    ctx = Context(endpoints=endpoints, tmp=tmp, sink=sink_dir)
    loaded: list[Subject] = []
    skipped: dict[str, str] = {}
    for name in subjects:
        try:
            subject = load_subject(name, ctx)
            subject.setup()
            loaded.append(subject)
        except Exception as exc:  # a peer that is not installed or cannot start
            skipped[name] = f"{type(exc).__name__}: {exc}"
            progress(f"skipping {name}: {skipped[name]}")
    raw: dict[str, dict[str, list[Any]]] = {w: {s.name: [] for s in loaded} for w in workloads}
    started = time.time()
    try:
        for rep in range(sizes.runs):
            for workload in workloads:
                _, fn = WORKLOADS[workload]
                order = loaded[rep % len(loaded) :] + loaded[: rep % len(loaded)] if loaded else []
                for subject in order:
                    if workload not in subject.workloads:
                        continue
                    progress(f"run {rep + 1}/{sizes.runs} {workload} {subject.name} ...")
                    try:
                        metrics = fn(subject, sizes)
                    except Exception as exc:
                        metrics = {"error": f"{type(exc).__name__}: {exc}"}
                        progress(traceback.format_exc(limit=3))
                    progress(f"    {_short(metrics)}")
                    raw[workload][subject.name].append(metrics)
    finally:
        for subject in loaded:
            try:
                subject.teardown()
            except Exception as exc:
                progress(f"teardown of {subject.name} failed: {exc}")
    return summarise(
        raw,
        loaded,
        skipped,
        sizes=sizes,
        mode=mode,
        command=command,
        seconds=time.time() - started,
    )


def _stop_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so workers are stopped and databases dropped."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def _short(metrics: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = {k for r in runs for k, v in r.items() if isinstance(v, int | float)}
    return {k: median([r[k] for r in runs if isinstance(r.get(k), int | float)]) for k in keys}


def _ratio_runs(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str) -> list[float]:
    """Ratios of the same repetition: a_i / b_i."""
    out = []
    for x, y in zip(a, b, strict=False):
        if isinstance(x.get(key), int | float) and isinstance(y.get(key), int | float) and y[key]:
            out.append(x[key] / y[key])
    return out


def summarise(
    raw: dict[str, dict[str, list[Any]]],
    subjects: list[Subject],
    skipped: dict[str, str],
    *,
    sizes: Sizes,
    mode: str,
    command: str,
    seconds: float,
) -> dict[str, Any]:
    by_name = {s.name: s for s in subjects}
    results: dict[str, Any] = {}
    for workload, per_subject in raw.items():
        results[workload] = {}
        key, _ = HEADLINE[workload]
        for name, runs in per_subject.items():
            if not runs:
                continue
            entry: dict[str, Any] = {"runs": runs, "median": _medians(runs)}
            errors = [r["error"] for r in runs if "error" in r]
            if errors:
                entry["errors"] = errors
            durq = f"durq-{'pg' if by_name[name].backend == 'postgresql' else 'sqlite'}"
            if by_name[name].family != "durq" and durq in per_subject and per_subject[durq]:
                ratios = _ratio_runs(per_subject[durq], runs, key)
                entry["durq_ratio"] = {"metric": key, "per_run": ratios, "median": median(ratios)}
            results[workload][name] = entry
    report = {
        "meta": {
            "command": command,
            "mode": mode,
            "sizes": sizes.as_dict(),
            "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "duration_s": round(seconds, 1),
            "machine": machine(),
        },
        "subjects": {
            s.name: {
                "backend": s.backend,
                "family": s.family,
                "configuration": s.config_note,
                "versions": s.versions(),
            }
            for s in subjects
        },
        "skipped": skipped,
        "results": results,
    }
    report["targets"] = targets(report)
    return report


def _med(report: dict[str, Any], workload: str, subject: str, key: str) -> float:
    try:
        return float(report["results"][workload][subject]["median"][key])
    except KeyError:
        return math.nan


def _ratio(report: dict[str, Any], workload: str, subject: str) -> float:
    try:
        return float(report["results"][workload][subject]["durq_ratio"]["median"])
    except KeyError:
        return math.nan


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each checked against this run's medians and ratios."""
    rows: list[dict[str, Any]] = []

    def add(
        name: str, value: float, goal: float, *, at_most: bool = False, unit: str = "x"
    ) -> None:
        met = None if math.isnan(value) else (value <= goal if at_most else value >= goal)
        rows.append(
            {
                "target": name,
                "value": value,
                "goal": goal,
                "unit": unit,
                "at_most": at_most,
                "met": met,
            }
        )

    add("W3 PG 1 proc vs PgQueuer", _ratio(report, "W3", "pgqueuer"), 1.5)
    add("W3 PG 1 proc vs raw-SQL ceiling", _ratio(report, "W3", "raw-sql-pg"), 0.6)
    add("W2 PG vs raw COPY", _ratio(report, "W2", "raw-sql-pg"), 0.8)
    w1_durq = _med(report, "W1", "durq-pg", "jobs_per_s")
    add(
        "W1 PG vs raw single INSERT",
        w1_durq / _med(report, "W1", "raw-sql-pg", "insert_only_jobs_per_s"),
        0.9,
    )
    add("W4 p99 PG (ms)", _med(report, "W4", "durq-pg", "p99_ms"), 5.0, at_most=True, unit="ms")
    add(
        "W4 p99 SQLite in-process (ms)",
        _med(report, "W4", "durq-sqlite-inproc", "p99_ms"),
        5.0,
        at_most=True,
        unit="ms",
    )
    add(
        "W4 p99 SQLite, worker in another process (ms)",
        _med(report, "W4", "durq-sqlite", "p99_ms"),
        10.0,
        at_most=True,
        unit="ms",
    )
    for backend in ("pg", "sqlite"):
        base = _med(report, "W3", f"durq-{backend}", "jobs_per_s")
        add(
            f"W6 {backend} retained finished rows vs empty W3",
            _med(report, "W6", f"durq-{backend}", "retained_jobs_per_s") / base,
            0.9,
        )
        add(
            f"W6 {backend} backlog vs empty W3",
            _med(report, "W6", f"durq-{backend}", "backlog_jobs_per_s") / base,
            0.9,
        )
    add("W3 SQLite vs Huey", _ratio(report, "W3", "huey-sqlite"), 5.0)
    add("W3 SQLite vs raw sqlite3 ceiling", _ratio(report, "W3", "raw-sqlite"), 0.4)
    plain = _med(report, "W3", "durq-pg", "jobs_per_s")
    for feature in ("breakers", "webhooks"):
        add(
            f"W3 PG with {feature} vs plain W3",
            _med(report, "W3", f"durq-pg-{feature}", "jobs_per_s") / plain,
            0.8,
        )
    add(
        "W3 PG worker defaults vs PgQueuer defaults",
        _med(report, "W3", "durq-pg-defaults", "jobs_per_s")
        / _med(report, "W3", "pgqueuer-defaults", "jobs_per_s"),
        1.0,
    )
    add(
        "worker RSS PG at concurrency 50 (MB)",
        _med(report, "RSS", "durq-pg", "peak_rss_mb"),
        150.0,
        at_most=True,
        unit="MB",
    )
    return rows


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
        info["memory_gib"] = round(int(mem) / 1024 / 1024)
    except (OSError, IndexError, ValueError):
        pass
    try:
        import psycopg

        with psycopg.connect(Endpoints().pg_admin_url) as conn:
            row = conn.execute(
                "SELECT current_setting('server_version'), current_setting('synchronous_commit'),"
                " current_setting('fsync')"
            ).fetchone()
            if row:
                info["postgresql"] = {
                    "version": row[0],
                    "synchronous_commit": row[1],
                    "fsync": row[2],
                }
    except Exception:
        pass
    try:
        out = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False, timeout=5
        )
        info["redis"] = out.stdout.strip().split(" ")[2].removeprefix("v=")
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    import sqlite3

    info["sqlite"] = sqlite3.sqlite_version
    return info


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bench``: the same as ``durq bench``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--compare", action="store_true", help="include the peers")
    parser.add_argument("--full", action="store_true", help="the issue's sizes")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--subject", action="append", choices=sorted(SUBJECTS))
    parser.add_argument("--runs", type=int)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", type=Path)
    ns = parser.parse_args(argv)
    report = run_cli(
        compare=ns.compare,
        full=ns.full,
        workloads=ns.workload,
        subjects=ns.subject,
        runs=ns.runs,
        command="python -m bench " + " ".join(argv or sys.argv[1:]),
        quiet=ns.json,
    )
    text = dumps(report)
    if ns.output:
        ns.output.write_text(text + "\n")
    if ns.json:
        print(text)
    else:
        from .report import print_report

        print_report(report)


def run_cli(
    *,
    compare: bool,
    full: bool,
    workloads: Sequence[str] | None,
    subjects: Sequence[str] | None,
    runs: int | None,
    command: str,
    quiet: bool,
) -> dict[str, Any]:
    import dataclasses

    sizes = FULL if full else QUICK
    if runs:
        sizes = dataclasses.replace(sizes, runs=runs)
    chosen = list(subjects) if subjects else (list(SUBJECTS) if compare else DURQ_ONLY)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    return run(
        subjects=chosen,
        workloads=list(workloads) if workloads else list(WORKLOADS),
        sizes=sizes,
        mode="full" if full else "quick",
        command=command,
        progress=progress,
    )


def dumps(report: dict[str, Any]) -> str:
    """JSON with NaN (a missing figure) written as null."""
    return json.dumps(_clean(report), indent=2, default=str)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
