"""``durq workers``: live and dead worker processes."""

from __future__ import annotations

from datetime import UTC, datetime

import typer
from rich import box
from rich.table import Table

from ..wire import WorkerOut, dump
from .common import (
    AppOption,
    JsonOption,
    UrlOption,
    console,
    durq_errors,
    load_app,
    print_json,
)

__all__ = ["workers"]


def workers(
    alive: bool = typer.Option(False, "--alive", help="Only workers that are alive now."),
    limit: int = typer.Option(200, "--limit", min=1, max=10_000),
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Worker processes, newest first: alive, stopped (exited cleanly) or dead (silent).

    A dead worker's jobs are reclaimed by the others when their leases expire.

    Columns: conc = concurrency, done = jobs run to an outcome, up = running for,
    seen = last heartbeat.
    """
    app = load_app(app_spec, database_url)
    with durq_errors():
        found = app.list_workers(include_stopped=not alive, limit=limit)
    app.close()
    if alive:
        found = [w for w in found if w.alive]
    if as_json:
        print_json([dump(WorkerOut, w) for w in found])
        return
    now = datetime.now(UTC)
    grid = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        title=f"{sum(w.alive for w in found)} alive, {len(found)} listed",
    )
    grid.add_column("worker", overflow="fold", min_width=10)
    grid.add_column("status", no_wrap=True)
    grid.add_column("queues", overflow="fold", min_width=12)
    for header in ("conc", "running", "done", "up", "seen"):
        grid.add_column(header, justify="right", no_wrap=True)
    for w in found:
        end = w.stopped_at or now
        grid.add_row(
            w.id,
            w.status,
            ",".join(w.queues),
            str(w.concurrency),
            str(w.running),
            str(w.processed),
            _span((end - w.started_at).total_seconds()),
            _span((now - w.heartbeat_at).total_seconds()) + " ago",
        )
    console.print(grid)


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.0f}d"
