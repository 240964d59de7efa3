"""``durq events list|show|redeliver``, ``durq deliver`` and ``durq secrets rotate-kek``."""

from __future__ import annotations

import typer

from .._worker.delivery_process import DeliveryWorker
from ..outbox import EVENT_STATES
from .common import AppOption, JsonOption, UrlOption, durq_errors, load_app, print_json, table
from .supervisor import configure_logging

__all__ = ["deliver", "events_app", "secrets_app"]

events_app = typer.Typer(help="Outbox events: a job's webhooks.", no_args_is_help=True)
secrets_app = typer.Typer(help="Job secrets: key rotation.", no_args_is_help=True)


@events_app.command("list")
def list_events(
    job: int = typer.Option(None, "--job", help="Only this job's events (and its counters)."),
    state: str = typer.Option(None, "--state", help=f"One of {', '.join(EVENT_STATES)}."),
    after: int = typer.Option(None, "--after", help="Page: events after this sequence."),
    limit: int = typer.Option(100, min=1, max=1000),
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """List outbox events, oldest first."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        events = app.list_events(job_id=job, state=state, after_id=after, limit=limit)
        counters = app.job_counters(job) if job is not None else None
    if as_json:
        document = [e.to_dict() for e in events]
        print_json({"counters": counters, "events": document} if counters else document)
        return
    if counters:
        typer.echo("counters: " + ", ".join(f"{name}={value}" for name, value in counters.items()))
    table(
        f"{len(events)} event(s)",
        ["sequence", "event_id", "job", "type", "state", "attempts", "last_error"],
        [
            (
                e.id,
                e.event_id,
                e.job_id,
                e.event_type,
                e.state,
                e.attempt,
                (e.last_error or "")[:50],
            )
            for e in events
        ],
    )


@events_app.command("show")
def show_event(
    event_id: str = typer.Argument(..., help="The event's UUID."),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """One event, as JSON."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        print_json(app.get_event(event_id).to_dict())


@events_app.command("redeliver")
def redeliver(
    event_id: str = typer.Argument(..., help="The event's UUID."),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Send a dead-lettered (or delivered) event again, its delivery attempts reset."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        event = app.redeliver(event_id)
    typer.echo(f"event {event.event_id} is {event.state}")


def deliver(
    log_level: str = typer.Option("INFO", "--log-level"),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Deliver outbox events (webhooks) until SIGTERM/SIGINT, without running jobs."""
    configure_logging(log_level)
    app = load_app(app_spec, database_url)
    with durq_errors():
        code = DeliveryWorker(app.driver, app.settings).run()
    app.close()
    raise typer.Exit(code)


@secrets_app.command("rotate-kek")
def rotate_kek(
    from_kek: str = typer.Option(..., "--from", help="The KEK id to retire."),
    to_kek: str = typer.Option(..., "--to", help="The KEK id to wrap with from now on."),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Re-wrap every job's data key from one KEK to another (the blobs stay sealed)."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        count = app.rotate_kek(from_kek, to_kek)
    typer.echo(f"re-wrapped {count} job secret(s) from {from_kek} to {to_kek}")
