"""The :class:`Driver`: one database, with every named operation durq runs on it."""

from __future__ import annotations

from .api import ApiQueries
from .jobs import JobQueries
from .runtime import RuntimeQueries

__all__ = ["Driver"]


class Driver(JobQueries, RuntimeQueries, ApiQueries):
    """Connections (``base``), row decoding (``rows``) and the typed queries (``jobs``,
    ``runtime``, ``api``). Concrete drivers add the dialect: ``postgres``, ``sqlite``."""
