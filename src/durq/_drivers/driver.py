"""The :class:`Driver`: one database, with every named operation durq runs on it."""

from __future__ import annotations

from .api import ApiQueries
from .jobs import JobQueries
from .outbox import OutboxQueries
from .runtime import RuntimeQueries

__all__ = ["Driver"]


class Driver(JobQueries, RuntimeQueries, ApiQueries, OutboxQueries):
    """Connections (``base``), row decoding (``rows``) and the typed queries (``jobs``,
    ``runtime``, ``api``, ``outbox``). Concrete drivers add the dialect: ``postgres``,
    ``sqlite``."""
