"""The :class:`Driver`: one database, with every named operation durq runs on it."""

from __future__ import annotations

from .api import ApiQueries
from .insights import InsightQueries
from .jobs import JobQueries
from .keys import KeyQueries
from .outbox import OutboxQueries
from .runtime import RuntimeQueries

__all__ = ["Driver"]


class Driver(JobQueries, KeyQueries, RuntimeQueries, ApiQueries, OutboxQueries, InsightQueries):
    """Connections (``base``), row decoding (``rows``) and the typed queries (``jobs``,
    ``keys``, ``runtime``, ``api``, ``outbox``, ``insights``). Concrete drivers add the dialect:
    ``postgres``, ``sqlite``."""
