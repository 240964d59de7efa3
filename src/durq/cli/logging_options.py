"""``--log-level`` and ``--log-format``, checked once for every command that logs."""

from __future__ import annotations

from typing import cast

from ..logs import LogFormat
from ..settings import Settings
from .common import EXIT_USAGE, fail

__all__ = ["logging_options"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("auto", "console", "json")


def logging_options(level: str | None, fmt: str | None) -> tuple[str, LogFormat]:
    """The flags, else ``DURQ_LOG_LEVEL`` / ``DURQ_LOG_FORMAT``; a bad value exits 2."""
    settings = Settings()
    level = (level or settings.log_level).upper()
    fmt = (fmt or settings.log_format).lower()
    if level not in LEVELS:
        fail(f"--log-level must be one of {', '.join(LEVELS)}, got {level!r}", EXIT_USAGE)
    if fmt not in FORMATS:
        fail(f"--log-format must be one of {', '.join(FORMATS)}, got {fmt!r}", EXIT_USAGE)
    return level, cast(LogFormat, fmt)
