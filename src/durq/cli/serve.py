"""``durq serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import typer

from .. import logs
from ..errors import DurqError
from .common import AppOption, UrlOption, api_extra, err_console, load_app
from .logging_options import logging_options


def serve(
    app_spec: str = AppOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    log_level: str = typer.Option(
        None, "--log-level", help="DEBUG, INFO, WARNING or ERROR (default DURQ_LOG_LEVEL, INFO)."
    ),
    log_format: str = typer.Option(
        None, "--log-format", help="json, console, or auto (DURQ_LOG_FORMAT)."
    ),
    database_url: str = UrlOption,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) and the dashboard (/ui/)."""
    with api_extra("serve"):
        import uvicorn

        from ..api import create_app
        from ..api.server import EnvelopeH11Protocol

    level, fmt = logging_options(log_level, log_format)
    logs.configure(level, fmt)
    app = load_app(app_spec, database_url)
    try:
        app.check_schema()
    except DurqError as exc:  # still serve: /readyz says what is wrong until it is fixed
        err_console.print(f"[yellow]warning:[/] {exc}", highlight=False)
    api = create_app(app)
    if app.settings.env == "dev" and not app.settings.api_bootstrap_keys:
        roles = ", ".join(f"dev-{r}-key ({r})" for r in app.settings.role_ladder)
        err_console.print(f"DURQ_ENV=dev: development API keys {roles}", highlight=False)
    err_console.print(
        f"durq API on http://{host}:{port} (docs at /docs, dashboard at /ui/, "
        f"tasks: {sorted(app.tasks) or 'none'})",
        highlight=False,
    )
    # uvicorn logs through the standard library, so its lines take durq's format too.
    uvicorn.run(
        api,
        host=host,
        port=port,
        log_level=level.lower(),
        access_log=False,
        log_config=None,
        http=EnvelopeH11Protocol,  # unparseable requests get the error envelope too
    )
