"""``durq``: the command line entry point."""

from __future__ import annotations

import typer

from .. import __version__
from ..demo import run_demo
from ..errors import ConfigurationError
from .bench import bench
from .breakers import alerts_app, breakers_app
from .common import EXIT_USAGE, AppOption, UrlOption, durq_errors, err_console, load_app
from .enqueue import enqueue
from .events import deliver, events_app, secrets_app
from .jobs import jobs_app
from .keys import keys_app
from .queues import queues_app
from .serve import serve
from .worker import worker
from .workers import workers

app = typer.Typer(
    name="durq",
    help="durq: a durable job queue on PostgreSQL and SQLite. Settings come from DURQ_* "
    "environment variables or .env.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"durq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print durq's version and exit.",
    ),
) -> None:
    """durq: a durable job queue on PostgreSQL and SQLite."""


app.add_typer(jobs_app, name="jobs")
app.add_typer(queues_app, name="queues")
app.add_typer(breakers_app, name="breakers")
app.add_typer(alerts_app, name="alerts")
app.command("worker")(worker)
app.command("workers")(workers)
app.command("enqueue")(enqueue)
app.add_typer(keys_app, name="keys")
app.command("serve")(serve)
app.command("bench")(bench)
app.add_typer(events_app, name="events")
app.add_typer(secrets_app, name="secrets")
app.command("deliver")(deliver)


@app.command()
def migrate(
    sql: bool = typer.Option(False, "--sql", help="Print the DDL instead of applying it."),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Apply pending schema migrations (safe to run from many processes at once)."""
    durq_app = load_app(app_spec, database_url)
    if sql:
        typer.echo(durq_app.driver.migration_sql())
        return
    with durq_errors():
        applied = durq_app.migrate()
    typer.echo(f"applied migrations {applied}" if applied else "schema is up to date")


@app.command()
def demo(
    jobs: int = typer.Option(5000, "--jobs", min=10, help="How many jobs to enqueue."),
    database_url: str = typer.Option(
        "sqlite:///durq-demo.db", "--database-url", help="Where the demo writes its jobs."
    ),
) -> None:
    """Run durq's main job end to end on SQLite: enqueue a realistic mix, work it, report."""
    with durq_errors():
        run_demo(database_url, jobs)


def main() -> None:
    try:
        app()
    except ConfigurationError as exc:  # a bad setting: one line, no traceback, exit 2
        err_console.print(f"[bold red]error:[/] {exc} [{exc.code}]", highlight=False)
        raise SystemExit(EXIT_USAGE) from None


if __name__ == "__main__":
    main()
