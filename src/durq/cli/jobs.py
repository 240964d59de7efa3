"""``durq jobs list|show|cancel|requeue``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import typer

from ..types import Job
from ..wire import ArtifactOut, AttemptOut, JobOut, dump, requeue_view
from .common import (
    AppOption,
    JsonOption,
    UrlOption,
    console,
    durq_errors,
    load_app,
    print_json,
    table,
)

#: How many closing lines of a traceback ``jobs show`` prints (--json has all of it).
TRACEBACK_LINES = 6

jobs_app = typer.Typer(help="Inspect and act on jobs.", no_args_is_help=True)


def job_json(job: Job) -> dict[str, Any]:
    return dump(JobOut, job)


@jobs_app.command("list")
def list_jobs(
    state: list[str] = typer.Option(None, "--state", help="Filter by state (repeatable)."),
    queue: str = typer.Option(None, help="Filter by queue."),
    task: str = typer.Option(None, help="Filter by task name."),
    created_after: datetime = typer.Option(None, help="ISO time, UTC if no offset."),
    created_before: datetime = typer.Option(None, help="ISO time, UTC if no offset."),
    limit: int = typer.Option(50, min=1, max=1000),
    before_id: int = typer.Option(None, help="Page: show jobs older than this id."),
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """List jobs, newest first."""
    app = load_app(app_spec, database_url)
    filters: dict[str, Any] = {
        "state": state or None,
        "queue": queue,
        "task": task,
        "created_after": _utc(created_after),
        "created_before": _utc(created_before),
    }
    with durq_errors():
        jobs = app.list_jobs(**filters, before_id=before_id, limit=limit)
        total = app.count_jobs(**filters) if len(jobs) == limit or before_id else len(jobs)
    if as_json:
        print_json([job_json(j) for j in jobs])
        return
    title = f"{len(jobs)} job(s)"
    if len(jobs) < total:  # never cut a listing silently
        title = f"showing {len(jobs)} of {total} job(s)"
        if jobs:
            title += f"; next page: --before-id {jobs[-1].id} (or a larger --limit)"
    table(
        title,
        ["id", "queue", "task", "state", "attempt", "run_at", "last_error"],
        [
            (
                j.id,
                j.queue,
                j.task,
                j.state,
                f"{j.attempt}/{j.max_attempts}",
                j.run_at.isoformat(timespec="seconds"),
                (j.last_error or "")[:60],
            )
            for j in jobs
        ],
    )


@jobs_app.command("show")
def show(
    job_id: int,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """One job with its attempts and artifacts."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        job = app.get_job(job_id)
        attempts = app.attempts(job_id)
        artifacts = app.artifacts(job_id)
    if as_json:
        print_json(
            job_json(job)
            | {
                "attempts": [dump(AttemptOut, a) for a in attempts],
                "artifacts": [dump(ArtifactOut, a) for a in artifacts],
            }
        )
        return
    table(f"job {job.id}", ["field", "value"], [(k, v) for k, v in job_json(job).items()])
    table(
        "attempts",
        ["#", "worker", "started", "runtime_ms", "outcome", "error"],
        [
            (a.attempt, a.worker_id, a.started_at, a.runtime_ms, a.outcome, a.error_message)
            for a in attempts
        ],
    )
    reported = [a for a in attempts if (a.processed, a.failed, a.summary) != (None, None, None)]
    if reported:  # the run logs tasks wrote with ctx.report(...)
        table(
            "run logs",
            ["#", "finished", "outcome", "processed", "failed", "summary"],
            [
                (a.attempt, a.finished_at, a.outcome, a.processed, a.failed, a.summary)
                for a in reported
            ],
        )
    for a in attempts:
        if a.traceback:
            head = "\n".join(a.traceback.rstrip().splitlines()[-TRACEBACK_LINES:])
            console.print(f"[bold]attempt {a.attempt} traceback (end):[/]", highlight=False)
            console.print(head, markup=False, highlight=False)
    if artifacts:
        table(
            "artifacts",
            ["type", "ref", "payload"],
            [(a.artifact_type, a.ref, json.dumps(a.payload)[:80]) for a in artifacts],
        )


@jobs_app.command("cancel")
def cancel(
    job_id: int,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Cancel a job (a running one is cancelled at its worker's next write)."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        job = app.cancel(job_id)
    if as_json:
        print_json(job_json(job))
    else:
        note = (
            " (cancel requested; the worker honours it at its next write)"
            if job.cancel_requested
            else ""
        )
        typer.echo(f"job {job.id}: {job.state}{note}")


@jobs_app.command("requeue")
def requeue(
    job_id: int,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Put a job back in its queue with attempts and error reset (running: no-op)."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        res = app.requeue(job_id)
    if as_json:
        print_json(requeue_view(res))
    elif res.idempotent:
        typer.echo(f"job {res.job.id} is running; left as it is (idempotent no-op)")
    else:
        typer.echo(f"job {res.job.id}: requeued")


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
