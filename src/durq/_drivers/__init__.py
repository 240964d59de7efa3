"""The driver seam: everything durq says to a database goes through a :class:`Driver`.

A driver is a set of named, typed operations over SQL blocks (``*.sql`` beside each
dialect), capability flags, and value conversion; it holds no job policy. The engine
(``durq._engine``) holds the rules; :func:`open_driver` is the one place a concrete
driver is chosen.
"""

from __future__ import annotations

from .api import ApiKey, AttemptBucket, JobArgCount
from .base import Capabilities, FinishRequest, LoopConnection, NewJob
from .driver import Driver
from .outbox import DeliveryWrite
from .sql import Executor

__all__ = [
    "ApiKey",
    "AttemptBucket",
    "Capabilities",
    "DeliveryWrite",
    "Driver",
    "Executor",
    "FinishRequest",
    "JobArgCount",
    "LoopConnection",
    "NewJob",
    "open_driver",
]


def open_driver(
    url: str,
    *,
    pool_min_size: int = 1,
    pool_max_size: int = 10,
    sqlite_synchronous: str = "FULL",
    sqlite_busy_timeout_ms: int = 30_000,
    pgbouncer: bool = False,
) -> Driver:
    """The driver for ``url``. Imported on demand: a SQLite app never loads psycopg."""
    if url.startswith("sqlite:"):
        from .sqlite.driver import SqliteDriver

        return SqliteDriver(
            url, synchronous=sqlite_synchronous, busy_timeout_ms=sqlite_busy_timeout_ms
        )
    from .postgres.driver import PostgresDriver

    return PostgresDriver(url, min_size=pool_min_size, max_size=pool_max_size, pgbouncer=pgbouncer)
