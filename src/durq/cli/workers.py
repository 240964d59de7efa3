"""``durq workers``: live and dead worker processes."""

from __future__ import annotations

from datetime import UTC, datetime

import typer

from .common import AppOption, JsonOption, UrlOption, durq_errors, load_app, print_json, table

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
    """
    app = load_app(app_spec, database_url)
    with durq_errors():
        found = app.list_workers(include_stopped=not alive, limit=limit)
    app.close()
    if alive:
        found = [w for w in found if w.alive]
    if as_json:
        print_json([w.to_dict() for w in found])
        return
    now = datetime.now(UTC)
    table(
        f"{sum(w.alive for w in found)} alive, {len(found)} listed",
        [
            "id",
            "status",
            "queues",
            "concurrency",
            "running",
            "processed",
            "started",
            "last heartbeat",
        ],
        [
            (
                w.id,
                w.status,
                ",".join(w.queues),
                w.concurrency,
                w.running,
                w.processed,
                w.started_at.isoformat(timespec="seconds"),
                f"{(now - w.heartbeat_at).total_seconds():.1f}s ago",
            )
            for w in found
        ],
    )
