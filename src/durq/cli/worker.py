"""``durq worker``: run jobs until stopped."""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import Any

import typer

from .._worker.runner import Worker
from ..errors import ConfigurationError, DurqError
from ..settings import redact_url, unknown_variables
from .common import EXIT_FAILURE, EXIT_USAGE, UrlOption, database_source, err_console, fail
from .loading import import_app
from .logging_options import logging_options
from .supervisor import configure_logging, supervise

__all__ = ["worker"]


def worker(
    app_spec: str = typer.Option(
        ...,
        "--app",
        envvar="DURQ_APP",
        help="Your App as module:attribute (e.g. myproj.jobs:app); its tasks are what runs.",
    ),
    queues: str = typer.Option(
        None,
        "--queues",
        "-q",
        help="Comma-separated queues to work (default: DURQ_QUEUES, else every queue the "
        "App's tasks use).",
    ),
    concurrency: int = typer.Option(
        None, "--concurrency", "-c", min=1, max=1000, help="Jobs in flight per process."
    ),
    prefetch: int = typer.Option(
        None,
        "--prefetch",
        min=0,
        max=1000,
        help="Jobs claimed ahead of free slots, started as slots free (released on shutdown).",
    ),
    processes: int = typer.Option(
        None, "--processes", "-p", min=1, max=64, help="Worker processes under one supervisor."
    ),
    once: bool = typer.Option(
        False, "--once", help="Process at most one ready job, then exit (none ready: exit now)."
    ),
    max_jobs: int = typer.Option(
        None, "--max-jobs", min=1, help="Exit after this many jobs (per process)."
    ),
    poll_interval: float = typer.Option(
        None, "--poll-interval", min=0, help="Seconds between polls when idle (at least 0.1)."
    ),
    lease_seconds: float = typer.Option(
        None, "--lease-seconds", min=0.001, help="How long a claim lasts without a heartbeat."
    ),
    heartbeat_seconds: float = typer.Option(
        None, "--heartbeat-seconds", min=0.001, help="How often leases are extended."
    ),
    shutdown_timeout: float = typer.Option(
        None,
        "--shutdown-timeout",
        min=0,
        help="On SIGTERM/SIGINT, how long running jobs may finish before they are released.",
    ),
    shutdown_hard_timeout: float = typer.Option(
        None,
        "--shutdown-hard-timeout",
        min=0,
        help="After --shutdown-timeout, how long a task that cannot be stopped keeps its "
        "lease before the worker exits 1 without releasing it.",
    ),
    pool: str = typer.Option(
        None,
        "--pool",
        help="thread (default): async tasks on the event loop, sync tasks in threads; "
        "process: every task in a task process, so a crash fails only its attempt.",
    ),
    max_tasks_per_child: int = typer.Option(
        None, "--max-tasks-per-child", min=1, help="Replace a task process after N jobs."
    ),
    poll_only: bool = typer.Option(
        False,
        "--poll-only",
        help="Do not LISTEN for new jobs; poll only (PostgreSQL behind PgBouncer "
        "transaction pooling). Same as DURQ_LISTEN_NOTIFY=false.",
    ),
    no_deliveries: bool = typer.Option(
        False, "--no-deliveries", help="Do not deliver outbox events here (see `durq deliver`)."
    ),
    log_level: str = typer.Option(
        None, "--log-level", help="DEBUG, INFO, WARNING or ERROR (default DURQ_LOG_LEVEL, INFO)."
    ),
    log_format: str = typer.Option(
        None,
        "--log-format",
        help="json, console, or auto: JSON unless stderr is a terminal (DURQ_LOG_FORMAT).",
    ),
    database_url: str = UrlOption,
) -> None:
    """Run jobs: claim, execute, record outcomes, until SIGTERM/SIGINT.

    First signal: stop claiming, let running jobs finish (--shutdown-timeout), then exit 0.

    Jobs still running then go back to queued without spending an attempt, each once its
    code has stopped (--shutdown-hard-timeout bounds the wait; then exit 1, leases expire).

    A second signal exits at once; leases expire and other workers reclaim the jobs.
    """
    log_level, log_format = logging_options(log_level, log_format)
    configure_logging(log_level, log_format)
    options: dict[str, Any] = {
        "queues": queues,
        "concurrency": concurrency,
        "prefetch": prefetch,
        "poll_interval": poll_interval,
        "lease_seconds": lease_seconds,
        "heartbeat_seconds": heartbeat_seconds,
        "shutdown_timeout": shutdown_timeout,
        "shutdown_hard_timeout": shutdown_hard_timeout,
        "pool": pool,
        "max_tasks_per_child": max_tasks_per_child,
        # Task processes load the App the way this process does.
        "app_loader": partial(import_app, app_spec, database_url),
        "listen_notify": False if poll_only else None,
        "max_jobs": max_jobs,
        "once": once,
        "deliveries": not no_deliveries,
    }
    for warning in unknown_variables(os.environ):
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    try:
        app = import_app(app_spec, database_url)
        err_console.print(
            f"[dim]database: {redact_url(app.database_url)} "
            f"(from {database_source(app, app_spec, database_url)})[/]",
            highlight=False,
        )
        count = processes or app.settings.processes
        run = Worker(app, **options)  # validates every option before anything starts
    except ConfigurationError as exc:
        fail(f"{exc} [{exc.code}]", EXIT_USAGE)
    if count > 1:
        app.close()
        code = supervise(
            app_spec,
            count,
            options | {"log_level": log_level, "log_format": log_format},
            database_url=database_url,
        )
        raise typer.Exit(code)
    try:
        code = run.run()
    except DurqError as exc:  # cannot reach the database, schema missing: say how to fix it
        fail(f"{exc} [{exc.code}]", EXIT_FAILURE)
    finally:
        app.close()
    if run.abandoned_threads or run.left_running:  # do not wait for code left running
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)
