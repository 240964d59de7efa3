"""One logging setup for every durq process: structured lines, JSON in production.

``configure()`` routes both structlog loggers (the API) and the standard library's
``logging`` (the worker, maintenance) through one structlog formatter, so every line has
the same shape: time, level, logger, event, and the ids known where it was written
(``job_id``, ``task``, ``queue``, ``attempt``, ``worker_id``, ``request_id``). Passwords in
URLs, API keys and credential headers are redacted from every line, whatever logged them.

A library stays quiet: nothing is configured until a composition root (``durq worker``,
``durq serve``) calls :func:`configure`.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, Literal

import structlog

__all__ = ["LogFormat", "configure", "redact", "redact_text"]

LogFormat = Literal["auto", "console", "json"]

#: Names whose values are secrets wherever they appear in a log line.
SECRET_KEYS = frozenset(
    {"authorization", "x-api-key", "api_key", "password", "secret", "secrets", "token", "key"}
)
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@\s]+@", re.I)
_API_KEY = re.compile(r"\bdurq_[A-Za-z0-9_-]{16,}")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def redact_text(text: str) -> str:
    """``text`` with URL passwords, durq API keys and bearer credentials replaced."""
    text = _URL_PASSWORD.sub(r"\g<scheme>\g<user>:***@", text)
    text = _API_KEY.sub("durq_***", text)
    return _BEARER.sub(r"\1 ***", text)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: no secret leaves a log line."""
    for name, value in list(event.items()):
        if name.lower() in SECRET_KEYS and value is not None:
            event[name] = "***"
        elif isinstance(value, str):
            event[name] = redact_text(value)
        elif isinstance(value, dict):
            event[name] = {
                k: "***" if str(k).lower() in SECRET_KEYS else v for k, v in value.items()
            }
    return event


def configure(level: str = "INFO", fmt: LogFormat = "auto") -> None:
    """Log at ``level`` to stderr: JSON lines (``fmt="json"``, or ``"auto"`` when stderr is
    not a terminal, as in production) or a readable console format."""
    json_lines = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
