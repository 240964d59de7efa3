"""``durq queues``: per-queue health; ``durq queues pause|resume NAME``."""

from __future__ import annotations

from typing import Any

import typer
from rich import box
from rich.table import Table

from ..wire import dump_queues
from .common import (
    AppOption,
    JsonOption,
    UrlOption,
    console,
    durq_errors,
    load_app,
    print_json,
)

__all__ = ["queues_app"]

queues_app = typer.Typer(
    help="Queue health: jobs by state (run = running, retry = retry_wait, done = succeeded, "
    "dead = dead_letter, canc = cancelled), oldest and p95 age of ready jobs. "
    "Subcommands pause and resume a queue.",
    invoke_without_command=True,
)

STATES = ("queued", "running", "retry_wait", "succeeded", "dead_letter", "cancelled")
HEADERS = ("queued", "run", "retry", "done", "dead", "canc")  # short: fits 80 columns


@queues_app.callback()
def show(
    ctx: typer.Context,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Per queue: counts by state, ready jobs, oldest and p95 age of ready jobs."""
    if ctx.invoked_subcommand is not None:
        return
    app = load_app(app_spec, database_url)
    with durq_errors():
        stats = app.queue_stats()
    app.close()
    if as_json:
        print_json(dump_queues(stats))
        return
    grid = Table(
        box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title=f"{len(stats)} queue(s)"
    )
    grid.add_column("queue", overflow="fold", min_width=8)
    for header in (*HEADERS, "ready", "oldest", "p95", "state"):
        grid.add_column(header, justify="right", no_wrap=True)
    for name, s in sorted(stats.items()):
        grid.add_row(
            name,
            *(str(s["counts"].get(state, 0)) for state in STATES),
            str(s["ready"]),
            _age(s["oldest_age_seconds"]),
            _age(s["p95_age_seconds"]),
            _status(s),
        )
    console.print(grid)


@queues_app.command("pause")
def pause(name: str, app_spec: str = AppOption, database_url: str = UrlOption) -> None:
    """Stop workers from claiming this queue's jobs (enqueue still works)."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        app.pause_queue(name)
    app.close()
    typer.echo(f"queue {name}: paused")


@queues_app.command("resume")
def resume(name: str, app_spec: str = AppOption, database_url: str = UrlOption) -> None:
    """Let workers claim this queue's jobs again."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        app.resume_queue(name)
    app.close()
    typer.echo(f"queue {name}: resumed")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _status(stats: dict[str, Any]) -> str:
    flags = [name for name in ("paused", "degraded") if stats.get(name)]
    return ", ".join(flags) or "ok"
