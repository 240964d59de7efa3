"""``durq enqueue TASK --args JSON``: put one job in a queue from the shell."""

from __future__ import annotations

import json
from typing import Any

import typer

from ..errors import DurqError, ValidationError
from .common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    AppOption,
    JsonOption,
    UrlOption,
    fail,
    load_app,
    print_json,
    table,
)
from .jobs import job_json

__all__ = ["enqueue"]


def enqueue(
    task: str = typer.Argument(..., help="Task name (it need not be registered here)."),
    args: str = typer.Option("{}", "--args", help="Arguments as a JSON object, e.g. '{\"n\": 1}'."),
    queue: str = typer.Option(None, "--queue", help="Queue (default: the task's, else default)."),
    delay: float = typer.Option(None, "--delay", min=0, help="Seconds from now until it may run."),
    priority: int = typer.Option(None, "--priority", help="Lower runs first (default 0)."),
    max_attempts: int = typer.Option(None, "--max-attempts", min=1, help="1 means no retries."),
    idempotency_key: str = typer.Option(
        None,
        "--idempotency-key",
        help="Same key and arguments return the original job; other arguments: exit 1.",
    ),
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Enqueue one job and print it."""
    try:
        parsed: Any = json.loads(args)
    except json.JSONDecodeError as exc:
        fail(f"--args is not valid JSON ({exc}); e.g. --args '{{\"image_id\": 7}}'", EXIT_USAGE)
    if not isinstance(parsed, dict):
        fail(f"--args must be a JSON object, got {type(parsed).__name__}", EXIT_USAGE)
    app = load_app(app_spec, database_url)
    try:
        new = app.build(
            task,
            parsed,
            queue=queue,
            delay=delay,
            priority=priority,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
        )
        job, created = app.insert(new)
    except ValidationError as exc:
        fail(f"{exc} [{exc.code}]", EXIT_USAGE)
    except DurqError as exc:
        fail(f"{exc} [{exc.code}]", EXIT_FAILURE)
    finally:
        app.close()
    if as_json:
        print_json(job_json(job) | {"created": created})
        return
    note = "" if created else " (idempotency key seen before: the original job)"
    table(
        f"job {job.id}{note}",
        ["id", "task", "queue", "state", "priority", "run_at"],
        [
            (
                job.id,
                job.task,
                job.queue,
                job.state,
                job.priority,
                job.run_at.isoformat(timespec="seconds"),
            )
        ],
    )
