"""Euterpe's ``idempotency_keys`` table (seed 003 §9), beside durq's tables.

durq settles the key itself (scope ``euterpe:<requester_id>``, the request hash, 409 on a
mismatch) in the same transaction; this table adds what the seed asks to keep with it: the
response snapshot returned to every repeat, and its expiry.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    insert,
    select,
)
from sqlalchemy.engine import Engine

__all__ = ["IDEMPOTENCY_KEYS", "Snapshot", "Store", "sqlalchemy_url"]

metadata = MetaData()

IDEMPOTENCY_KEYS = Table(
    "euterpe_idempotency_keys",
    metadata,
    Column("requester_id", String(128), primary_key=True),
    Column("idempotency_key", String(255), primary_key=True),
    Column("request_hash", String(64), nullable=False),
    Column("job_id", Integer, nullable=False),
    Column("response_snapshot", Text, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


def sqlalchemy_url(database_url: str) -> str:
    """durq's URL spelled for SQLAlchemy (PostgreSQL through psycopg 3)."""
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+psycopg://" + database_url[len(prefix) :]
    return database_url


class Snapshot:
    def __init__(self, request_hash: str, job_id: int, response: dict[str, Any]) -> None:
        self.request_hash = request_hash
        self.job_id = job_id
        self.response = response


class Store:
    def __init__(self, database_url: str) -> None:
        url = sqlalchemy_url(database_url)
        # SQLite: requests run in FastAPI's threads, and durq writes to the same file
        args = {"check_same_thread": False, "timeout": 30} if url.startswith("sqlite") else {}
        self.engine: Engine = create_engine(url, connect_args=args)

    def create_tables(self) -> None:
        metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    @staticmethod
    def find(conn: Connection, requester_id: str, key: str) -> Snapshot | None:
        """The key's live snapshot; an expired one is deleted (the key is free again)."""
        row = conn.execute(
            select(IDEMPOTENCY_KEYS).where(
                IDEMPOTENCY_KEYS.c.requester_id == requester_id,
                IDEMPOTENCY_KEYS.c.idempotency_key == key,
            )
        ).first()
        if row is None:
            return None
        expires = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=UTC)
        if expires <= datetime.now(UTC):
            conn.execute(
                delete(IDEMPOTENCY_KEYS).where(
                    IDEMPOTENCY_KEYS.c.requester_id == requester_id,
                    IDEMPOTENCY_KEYS.c.idempotency_key == key,
                )
            )
            return None
        return Snapshot(row.request_hash, row.job_id, json.loads(row.response_snapshot))

    @staticmethod
    def remember(
        conn: Connection,
        requester_id: str,
        key: str,
        snapshot: Snapshot,
        ttl_seconds: float,
    ) -> None:
        conn.execute(
            insert(IDEMPOTENCY_KEYS).values(
                requester_id=requester_id,
                idempotency_key=key,
                request_hash=snapshot.request_hash,
                job_id=snapshot.job_id,
                response_snapshot=json.dumps(snapshot.response, sort_keys=True),
                expires_at=datetime.now(UTC) + timedelta(seconds=ttl_seconds),
            )
        )
