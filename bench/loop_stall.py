"""Does a claim stall the worker's event loop? W3 drains (one worker process, PostgreSQL)
with a timeline of the worker (:mod:`bench.timeline`): when its event loop sat in
``select()`` with nothing to run, and when a claim was in flight.

    python -m bench.loop_stall -o loop-stall.json
    python -m bench.loop_stall --jobs 40000 --runs 3 --setting prefetch=0 --setting prefetch=100

A setting is a list of ``name=value`` worker settings (``DURQ_<NAME>``), comma-separated;
``task_ms=5`` makes each job await 5 ms. For each drain it reports, over the span from the
first job claimed to the last claim that found jobs:

* ``claim_in_flight``: the share of the span with a claim statement outstanding;
* ``loop_idle``: the share of the span the event loop waited in ``select()``;
* ``loop_idle_during_claims``: the share of the claims' time in flight that the loop waited
  with nothing to run: the loop stalled on its own claim.

Drains alternate between the settings, so the machine's drift spreads over all of them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from .durq_subject import CONCURRENCY
from .measure import emit
from .scaling import drain, harness, header

Interval = tuple[float, float]


def _union(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _overlap(intervals: list[Interval], union: list[Interval]) -> float:
    """Total time of ``intervals`` (sorted, disjoint) inside ``union`` (sorted, disjoint)."""
    total, j = 0.0, 0
    for start, end in intervals:
        while j < len(union) and union[j][1] <= start:
            j += 1
        k = j
        while k < len(union) and union[k][0] < end:
            total += min(end, union[k][1]) - max(start, union[k][0])
            k += 1
    return total


def _clip(intervals: list[Interval], lo: float, hi: float) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def analyse(timeline: dict[str, Any]) -> dict[str, Any]:
    claims = [(s, e) for s, e, n in timeline["claims"] if n]
    if not claims:
        raise RuntimeError("the worker's timeline holds no claim that found jobs")
    lo, hi = claims[0][0], max(e for _, e in claims)
    span = hi - lo
    selects = _clip(sorted(tuple(x) for x in timeline["selects"]), lo, hi)
    in_flight = _union(_clip(claims, lo, hi))
    claim_time = sum(e - s for s, e in in_flight)
    idle = sum(e - s for s, e in selects)
    idle_in_claims = _overlap(selects, in_flight)
    sizes = [n for _, _, n in timeline["claims"] if n]
    return {
        "span_s": round(span, 3),
        "claims": len(sizes),
        "jobs_per_claim": round(statistics.mean(sizes), 1),
        "claim_ms": round(statistics.median(e - s for s, e in claims) * 1000, 2),
        "claim_in_flight": round(claim_time / span, 3),
        "loop_idle": round(idle / span, 3),
        "loop_idle_during_claims": round(idle_in_claims / claim_time, 3),
        "gap_between_claims_ms": round(
            statistics.median(b[0] - a[1] for a, b in itertools.pairwise(claims)) * 1000, 2
        )
        if len(claims) > 1
        else None,
    }


def _setting(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        out[name.strip()] = value.strip()
    return out


def _env(setting: dict[str, str]) -> dict[str, str]:
    env = {}
    for name, value in setting.items():
        key = "DURQ_BENCH_TASK_MS" if name == "task_ms" else f"DURQ_{name.upper()}"
        env[key] = value
    return env


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.loop_stall", description=__doc__.split("\n")[0]
    )
    p.add_argument("--jobs", type=int, default=40_000, help="jobs per drain (default 40000)")
    p.add_argument("--concurrency", type=int, default=CONCURRENCY, help="worker concurrency")
    p.add_argument("--setting", action="append", type=_setting, help="name=value,... (repeat)")
    p.add_argument("--runs", type=int, default=3, help="drains per setting")
    p.add_argument("-o", "--output", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    settings: list[dict[str, str]] = args.setting or [{}]

    drains: list[list[dict[str, Any]]] = [[] for _ in settings]
    with harness("durq-loop-stall-") as ctx:
        for run in range(args.runs):
            for i, setting in enumerate(settings):
                lines = ctx.tmp / f"timeline-{run}-{i}"
                lines.mkdir()
                env = _env(setting) | {"DURQ_BENCH_TIMELINE": str(lines)}
                row = drain(ctx, args.jobs, 1, args.concurrency, worker_env=env)
                files = list(lines.glob("timeline-*.json"))
                if len(files) != 1:
                    raise RuntimeError(f"expected one worker timeline, found {len(files)}")
                row |= analyse(json.loads(files[0].read_text()))
                drains[i].append(row)
                print(
                    f"[loop-stall] run {run + 1}, {setting or 'defaults'}: "
                    f"{row['jobs_per_s']} jobs/s, loop idle during claims "
                    f"{row['loop_idle_during_claims']:.0%}",
                    file=sys.stderr,
                    flush=True,
                )
        keys = ("jobs_per_s", "claim_in_flight", "loop_idle", "loop_idle_during_claims", "claim_ms")
        result = header(ctx, argv) | {
            "concurrency": args.concurrency,
            "settings": [
                {
                    "setting": setting,
                    "median": {k: statistics.median(r[k] for r in rows) for k in keys},
                    "drains": rows,
                }
                for setting, rows in zip(settings, drains, strict=True)
            ],
        }
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
