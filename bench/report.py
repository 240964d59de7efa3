"""The Rich table printed by ``durq bench``."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from .runner import HEADLINE
from .workloads import WORKLOADS


def _fmt(value: Any, unit: str = "") -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}{unit}"
    return f"{value:,.2f}{unit}"


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    meta = report["meta"]
    table = Table(
        title=f"durq bench ({meta['mode']} sizes, medians of {meta['sizes']['runs']} runs)",
        show_lines=False,
    )
    table.add_column("workload")
    table.add_column("subject")
    table.add_column("median", justify="right")
    table.add_column("detail")
    table.add_column("durq / subject", justify="right")
    for workload, per_subject in report["results"].items():
        key, _ = HEADLINE[workload]
        title, _ = WORKLOADS[workload]
        first = True
        for name, entry in per_subject.items():
            med = entry.get("median", {})
            detail = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(med.items()) if k != key)
            ratio = entry.get("durq_ratio", {}).get("median")
            table.add_row(
                f"{workload} {title}" if first else "",
                name,
                _fmt(med.get(key)),
                detail if "errors" not in entry else f"[red]{entry['errors'][0][:80]}[/red]",
                _fmt(ratio, "x") if ratio is not None else "",
            )
            first = False
        table.add_section()
    console.print(table)
    targets = Table(title="targets")
    targets.add_column("target")
    targets.add_column("value", justify="right")
    targets.add_column("goal", justify="right")
    targets.add_column("met")
    for row in report.get("targets", []):
        sign = "≤" if row["at_most"] else "≥"
        met = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "—"}[row["met"]]
        targets.add_row(row["target"], _fmt(row["value"]), f"{sign} {row['goal']}", met)
    console.print(targets)
    if report.get("skipped"):
        for name, why in report["skipped"].items():
            console.print(f"[yellow]skipped {name}[/yellow]: {why}")
