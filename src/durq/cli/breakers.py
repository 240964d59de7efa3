"""``durq breakers list|reset KEY`` and ``durq alerts [ack ID]``: the operator's view of
circuit breakers and the alerts durq raised."""

from __future__ import annotations

import typer

from .common import AppOption, JsonOption, UrlOption, durq_errors, load_app, print_json, table

__all__ = ["alerts_app", "breakers_app"]

breakers_app = typer.Typer(
    help="Circuit breakers by key: list them (open first), reset one.", no_args_is_help=True
)

alerts_app = typer.Typer(
    help="Alerts durq raised (open breakers, dead letters, degraded queues); ack ID "
    "acknowledges one.",
    invoke_without_command=True,
)

LimitOption = typer.Option(200, "--limit", min=1, help="At most this many rows.")


@breakers_app.command("list")
def list_breakers(
    failing: bool = typer.Option(
        False, "--failing", help="Only keys with failures or a pause (not closed and clean)."
    ),
    limit: int = LimitOption,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Every breaker key: state, consecutive failures, paused until, times opened."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        found = app.list_breakers(failing_only=failing, limit=limit)
    app.close()
    if as_json:
        print_json([b.to_dict() for b in found])
        return
    table(
        f"{len(found)} breaker(s)",
        ("key", "state", "failures", "threshold", "paused until", "opened"),
        [
            (
                b.key,
                b.state,
                b.consecutive_failures,
                b.threshold,
                b.paused_until.isoformat() if b.paused_until else None,
                b.opened_count,
            )
            for b in found
        ],
    )


@breakers_app.command("reset")
def reset_breaker(
    key: str,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Close KEY now: failures back to 0, its held jobs due, its alert resolved."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        found = app.reset_breaker(key)
    app.close()
    if as_json:
        print_json(found.to_dict())
        return
    typer.echo(f"breaker {key}: {found.state}")


@alerts_app.callback()
def list_alerts(
    ctx: typer.Context,
    state: str = typer.Option(
        "open", "--state", help="open, resolved or all.", case_sensitive=False
    ),
    limit: int = LimitOption,
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Alerts, newest first: category, severity, key, how often, since when."""
    if ctx.invoked_subcommand is not None:
        return
    state = state.lower()
    if state not in ("open", "resolved", "all"):
        raise typer.BadParameter(
            f"{state!r} is not a state; use open, resolved or all", param_hint="--state"
        )
    app = load_app(app_spec, database_url)
    with durq_errors():
        found = app.list_alerts(state=state, limit=limit)
    app.close()
    if as_json:
        print_json([a.to_dict() for a in found])
        return
    table(
        f"{len(found)} {state} alert(s)",
        ("id", "category", "severity", "key", "count", "first seen", "last seen", "state"),
        [
            (
                a.id,
                a.category,
                a.severity,
                a.key,
                a.count,
                a.first_seen.isoformat(),
                a.last_seen.isoformat(),
                ("open" if a.open else "resolved") + (", acked" if a.acked_at else ""),
            )
            for a in found
        ],
    )


@alerts_app.command("ack")
def ack_alert(
    alert_id: int = typer.Argument(..., min=1, help="The alert's id (durq alerts lists them)."),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Acknowledge an alert: it stays open until its cause clears."""
    app = load_app(app_spec, database_url)
    with durq_errors():
        app.ack_alert(alert_id)
    app.close()
    typer.echo(f"alert {alert_id}: acknowledged")
