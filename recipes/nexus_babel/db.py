"""``DBManager`` and the recipe's own tables, in the same database as durq's (US-INFRA-17).

durq owns its ``durq_*`` tables and migrations; the platform's tables (API keys, documents,
audit log) are created here with ``metadata.create_all`` at start-up (FR-036).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Integer,
    MetaData,
    String,
    Text,
    create_engine,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

__all__ = [
    "ApiKey",
    "AuditLog",
    "Base",
    "DBManager",
    "Document",
    "sqlalchemy_url",
    "utcnow",
]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _uuid() -> str:
    return str(uuid.uuid4())


class Base(DeclarativeBase):
    pass


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_uuid)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True, index=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    role: Mapped[str] = mapped_column(String(32), index=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    raw_mode_enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Document(Base):
    """One ingested corpus file: its text and the checksums the integrity audit re-checks."""

    __tablename__ = "documents"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_uuid)
    path: Mapped[str] = mapped_column(String(512), unique=True, index=True)
    title: Mapped[str] = mapped_column(String(256))
    text: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    line_count: Mapped[int] = mapped_column(Integer)
    word_count: Mapped[int] = mapped_column(Integer)
    ingested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AuditLog(Base):
    __tablename__ = "audit_logs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_uuid)
    action: Mapped[str] = mapped_column(String(128), index=True)
    mode: Mapped[str] = mapped_column(String(16), index=True, default="PUBLIC")
    actor: Mapped[str] = mapped_column(String(128), default="system")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


def sqlalchemy_url(database_url: str) -> str:
    """durq's URL spelled for SQLAlchemy (PostgreSQL through psycopg 3)."""
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+psycopg://" + database_url[len(prefix) :]
    return database_url


class DBManager:
    """The platform's engine and session factory (FR-032, FR-033)."""

    def __init__(self, database_url: str) -> None:
        url = sqlalchemy_url(database_url)
        self.connect_args: dict[str, Any] = {}
        if url.startswith("sqlite"):
            # sessions cross threads (FastAPI's pool, the sync runner); durq writes too,
            # so wait for its write lock rather than fail at once
            self.connect_args = {"check_same_thread": False, "timeout": 30}
        self.engine: Engine = create_engine(url, future=True, connect_args=self.connect_args)
        # SQLAlchemy 2 sessions never autocommit; autoflush stays off as in the seed
        self.session_factory = sessionmaker(bind=self.engine, autoflush=False)

    def create_all(self, metadata: MetaData = Base.metadata) -> None:
        metadata.create_all(bind=self.engine)

    def session(self) -> Session:
        return self.session_factory()

    def close(self) -> None:
        self.engine.dispose()
