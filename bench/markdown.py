"""Render a results JSON as the Markdown tables of docs/benchmarks.md.

``python -m bench.markdown bench/results/<file>.json``
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from .runner import HEADLINE
from .workloads import WORKLOADS

DETAIL = {
    "W1": ["insert_only_jobs_per_s"],
    "W4": ["p50_ms", "p95_ms"],
    "W5": ["offered_per_s", "p50_ms", "p99_ms"],
    "W6": ["backlog_jobs_per_s"],
    "RSS": ["jobs_per_s"],
}


def _fmt(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def render(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for workload, per_subject in report["results"].items():
        key, _ = HEADLINE[workload]
        title, _ = WORKLOADS[workload]
        extra = DETAIL.get(workload, [])
        lines.append(f"### {workload}: {title}\n")
        head = ["subject", key, *extra, "durq / subject (median of per-run ratios)"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for name, entry in per_subject.items():
            med = entry.get("median", {})
            ratio = entry.get("durq_ratio", {}).get("median")
            cells = [
                name,
                _fmt(med.get(key)),
                *(_fmt(med.get(k)) for k in extra),
                _fmt(ratio) if ratio is not None else "",
            ]
            if entry.get("errors"):
                cells[1] += f" (errors: {len(entry['errors'])})"
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("### Targets\n")
    lines.append("| target | this run | goal | met |")
    lines.append("|---|---|---|---|")
    for row in report.get("targets", []):
        sign = "≤" if row["at_most"] else "≥"
        met = {True: "yes", False: "**no**", None: "—"}[row["met"]]
        lines.append(f"| {row['target']} | {_fmt(row['value'])} | {sign} {row['goal']} | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text())
    sys.stdout.write(render(report))


if __name__ == "__main__":
    main()
