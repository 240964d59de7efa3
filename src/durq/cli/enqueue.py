"""``durq enqueue TASK --args JSON``: put one job in a queue from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from ..errors import DurqError, ValidationError
from .common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    AppOption,
    JsonOption,
    UrlOption,
    err_console,
    fail,
    load_app,
    print_json,
    table,
)
from .jobs import job_json

__all__ = ["enqueue"]


def enqueue(
    task: str = typer.Argument(
        ..., help="Task name; with --app it must be one of the App's tasks and --args must fit it."
    ),
    args: str = typer.Option(
        None, "--args", help="Arguments as a JSON object, e.g. '{\"n\": 1}' (default {})."
    ),
    args_file: str = typer.Option(
        None,
        "--args-file",
        help="Read the arguments' JSON object from this file ('-' for standard input): for "
        "arguments too large for a command line.",
    ),
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
    """Enqueue one job and print it.

    With --app the task is looked up in your App: a misspelled name or arguments that do
    not fit its signature are refused, and the task's own queue, retry policy and attempts
    apply. Without --app nothing can be checked: the job takes the default queue, policy
    and attempts unless you give them, and a warning says so."""
    parsed = _parsed_args(args, args_file)
    app = load_app(app_spec, database_url)
    if app_spec is None:
        err_console.print(
            f"[yellow]warning:[/] no --app given, so task {task!r} is not checked and its own "
            "queue, retry policy and max attempts are unknown here: the job gets "
            f"queue {queue or app.settings.default_queue!r} and the defaults. Pass --app "
            "module:attribute to use the task's own settings.",
            highlight=False,
        )
    try:
        new = app.build(
            task,
            parsed,
            queue=queue,
            delay=delay,
            priority=priority,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
            unchecked=app_spec is None,
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


def _parsed_args(args: str | None, args_file: str | None) -> dict[str, Any]:
    """The arguments from --args or --args-file: a JSON object, else a usage error (2)."""
    if args is not None and args_file is not None:
        fail("give --args or --args-file, not both", EXIT_USAGE)
    source, text = "--args", args if args is not None else "{}"
    if args_file is not None:
        source = "--args-file" if args_file != "-" else "standard input (--args-file -)"
        try:
            text = sys.stdin.read() if args_file == "-" else Path(args_file).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"--args-file {args_file!r} cannot be read: {exc}", EXIT_USAGE)
    try:
        parsed: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{source} is not valid JSON ({exc}); e.g. --args '{{\"image_id\": 7}}'", EXIT_USAGE)
    except (ValueError, RecursionError) as exc:  # too many digits, or nested too deeply
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        fail(
            f"{source} cannot be read as JSON ({reason}); pass large numbers as strings",
            EXIT_USAGE,
        )
    if not isinstance(parsed, dict):
        fail(f"{source} must be a JSON object, got {type(parsed).__name__}", EXIT_USAGE)
    return dict(parsed)
