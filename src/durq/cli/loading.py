"""Finding the user's App from ``module:attribute``, for every command and worker process."""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
import traceback
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
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigurationError(
                f"no module named {module_name!r} for --app {spec}: run from your project's "
                "folder, or add its folder to PYTHONPATH"
            ) from None
        raise _failed_import(spec, exc) from exc
    except Exception as exc:  # the module itself raised while importing
        raise _failed_import(spec, exc) from exc
    if not hasattr(module, attr):
        names = [n for n in vars(module) if not n.startswith("_")]
        close = difflib.get_close_matches(attr, names, n=1)
        hint = f" (did you mean {module_name}:{close[0]}?)" if close else ""
        raise ConfigurationError(f"module {module_name!r} has no attribute {attr!r}{hint}")
    app = getattr(module, attr)
    if callable(app) and not isinstance(app, App) and _takes_no_arguments(app):
        app = app()  # a factory: ``myproj.jobs:create_app``
    if not isinstance(app, App):
        raise ConfigurationError(
            f"{spec} is a {type(app).__name__}, not a durq.App: point --app at the App "
            "(e.g. app = durq.App()) or at a function that returns one"
        )
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


def _failed_import(spec: str, exc: BaseException) -> ConfigurationError:
    """The module was found but its own code failed: say so, with the real error."""
    origin = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {origin.filename}:{origin.lineno}" if origin else ""
    return ConfigurationError(
        f"importing the module of --app {spec} failed{where}: {type(exc).__name__}: {exc}"
    )
