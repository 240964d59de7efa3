"""Shared CLI plumbing: loading the App, printing tables or JSON, exit codes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import typer
from rich.console import Console
from rich.table import Table

from ..app import App
from ..errors import ConfigurationError, DurqError
from ..settings import DEFAULT_DATABASE_URL, redact_url, unknown_variables
from .loading import import_app

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "api_extra",
    "console",
    "database_source",
    "err_console",
    "fail",
    "load_app",
    "print_json",
    "table",
]

EXIT_FAILURE = 1
EXIT_USAGE = 2

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # messages stay greppable: no hard wraps

AppOption = typer.Option(
    None, "--app", help="Your App as module:attribute (e.g. myproj.jobs:app); tasks come from it."
)
UrlOption = typer.Option(
    None, "--database-url", help="Overrides DURQ_DATABASE_URL (default sqlite:///durq.db)."
)
JsonOption = typer.Option(False, "--json", help="Print JSON for scripts instead of a table.")


def load_app(spec: str | None, database_url: str | None = None) -> App:
    """``module:attribute`` → the App it names; without one, an App from settings.

    The App's connections are closed when the command ends.
    """
    app = _find_app(spec, database_url)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(app.close)
    for warning in unknown_variables(os.environ):
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    err_console.print(
        f"[dim]database: {redact_url(app.database_url)} "
        f"(from {database_source(app, spec, database_url)})[/]",
        highlight=False,
    )
    return app


def database_source(app: App, spec: str | None, flag: str | None) -> str:
    """Where the database URL came from, in the words a user would look for it."""
    if flag:
        return "--database-url"
    if "DURQ_DATABASE_URL" in os.environ:
        return "DURQ_DATABASE_URL"
    if "database_url" not in app.settings.model_fields_set:
        return f"the default; set DURQ_DATABASE_URL to use another ({DEFAULT_DATABASE_URL})"
    env_file = Path(".env")
    if env_file.is_file() and "DURQ_DATABASE_URL" in env_file.read_text(errors="replace"):
        return ".env"
    return f"the App {spec}" if spec else "settings"


def _find_app(spec: str | None, database_url: str | None) -> App:
    if spec is None:
        return App(database_url) if database_url else App()
    try:
        return import_app(spec, database_url)
    except ConfigurationError as exc:
        fail(str(exc), EXIT_USAGE)
        raise  # fail() exits; this keeps the type checker informed


def fail(message: str, code: int = EXIT_FAILURE) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@contextmanager
def durq_errors() -> Iterator[None]:
    """Turn durq's errors into one readable line and exit code 1."""
    try:
        yield
    except DurqError as exc:
        fail(f"{exc} [{exc.code}]")


#: The modules durq[api] brings: the HTTP service needs them, the library does not.
API_EXTRA_MODULES = ("fastapi", "starlette", "uvicorn", "prometheus_client")


@contextmanager
def api_extra(command: str) -> Iterator[None]:
    """A missing module of the ``api`` extra becomes one line saying what to install."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in API_EXTRA_MODULES:
            raise
        # Plain text on one line: the brackets are the command to type, not markup.
        typer.echo(
            f"error: `durq {command}` needs the HTTP extra, which is not installed "
            f"(no module {exc.name!r}): pip install 'durq[api]'",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE) from None


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    t = Table(title=title, show_lines=False)
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*["" if v is None else str(v) for v in row])
    console.print(t)


Command = Callable[..., None]
