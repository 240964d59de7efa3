"""Engines and sessions for the Nexus tables, on the database durq uses.

SQLite has no row locks: every session transaction starts with ``BEGIN IMMEDIATE``, so it
holds the database's write lock from its first statement. That gives the membership lock of
d-008 the same guarantee PostgreSQL's ``SELECT ... FOR UPDATE`` gives: a backfill and a
member removal never interleave between reading the membership and writing closure edges.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["SessionFactory", "make_engine", "make_session_factory", "sqlalchemy_url"]

SessionFactory = sessionmaker[Session]

#: How long a SQLite connection waits for the write lock before failing.
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0


def sqlalchemy_url(database_url: str) -> str:
    """durq's URL (``sqlite:///x.db``, ``postgresql://...``) as SQLAlchemy spells it."""
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+psycopg://" + database_url[len(prefix) :]
    if database_url.startswith(("sqlite:///", "postgresql+psycopg://")):
        return database_url
    raise ValueError(
        f"unsupported database URL {database_url.split('@')[-1]!r}: use sqlite:///path.db "
        "or postgresql://user@host:5432/dbname (the same URL durq uses)"
    )


def make_engine(database_url: str) -> Engine:
    url = sqlalchemy_url(database_url)
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})

    @event.listens_for(engine, "connect")
    def _manual_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event issues BEGIN

    @event.listens_for(engine, "begin")
    def _take_write_lock(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def make_session_factory(engine: Engine) -> SessionFactory:
    return sessionmaker(engine, expire_on_commit=False)
