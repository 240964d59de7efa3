"""Finding the user's App from ``module:attribute``, for every command and worker process."""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from ..app import App
from ..errors import ConfigurationError

__all__ = ["import_app"]


def import_app(spec: str, database_url: str | None = None) -> App:
    """``module:attribute`` → the App it names (a callable returning an App also works),
    pointed at ``database_url`` when one is given. Raises ``ConfigurationError``."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(
            f"the app must be given as module:attribute (e.g. myproj.jobs:app), got {spec!r}"
        )
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"cannot import {module_name!r} for the app: {exc}. Is it on PYTHONPATH?"
        ) from exc
    app = getattr(module, attr, None)
    if callable(app) and not isinstance(app, App) and _takes_no_arguments(app):
        app = app()  # a factory: ``myproj.jobs:create_app``
    if not isinstance(app, App):
        raise ConfigurationError(f"{spec} is not a durq.App (got {type(app).__name__})")
    if database_url:
        app.settings = app.settings.model_copy(update={"database_url": database_url})
        app.close()
    return app


def _takes_no_arguments(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind()
    except (TypeError, ValueError):
        return False
    return True
