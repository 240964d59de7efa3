"""The Nexus domain, as small as seeds 000 + 001 need: users, libraries (one default per
user), memberships, media, ``library_media``, default-library provenance (intrinsics and
closure edges) and the durable backfill jobs. SQLAlchemy 2, the same tables on SQLite and
PostgreSQL, in the same database as durq's own tables so enqueue can join a transaction."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    TypeDecorator,
    Uuid,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "BACKFILL_STATUSES",
    "MEMBERSHIP_ROLES",
    "Base",
    "DefaultLibraryBackfillJob",
    "DefaultLibraryClosureEdge",
    "DefaultLibraryIntrinsic",
    "Library",
    "LibraryMedia",
    "Media",
    "Membership",
    "User",
    "create_schema",
    "utcnow",
]

BACKFILL_STATUSES = ("pending", "running", "completed", "failed")
MEMBERSHIP_ROLES = ("owner", "admin", "member")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both backends (SQLite stores them without a zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware UTC datetime")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if not isinstance(value, datetime):
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "pk": "pk_%(table_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s",
            "ix": "ix_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
        }
    )


class User(Base):
    __tablename__ = "users"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Library(Base):
    __tablename__ = "libraries"
    __table_args__ = (
        # One default library per user.
        Index(
            "uq_libraries_one_default_per_owner",
            "owner_user_id",
            unique=True,
            sqlite_where=text("is_default"),
            postgresql_where=text("is_default"),
        ),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    owner_user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    is_default: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Membership(Base):
    __tablename__ = "memberships"
    __table_args__ = (CheckConstraint("role IN ('owner', 'admin', 'member')", name="role"),)
    library_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("libraries.id"), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Media(Base):
    __tablename__ = "media"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    kind: Mapped[str] = mapped_column(String(32))  # "file" or "web_article"
    title: Mapped[str] = mapped_column(String(500))
    processing_status: Mapped[str] = mapped_column(String(32), default="pending")
    requested_url: Mapped[str | None] = mapped_column(String(2048))
    canonical_url: Mapped[str | None] = mapped_column(String(2048), index=True)
    content_sha256: Mapped[str | None] = mapped_column(String(64), index=True)
    created_by_user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class LibraryMedia(Base):
    __tablename__ = "library_media"
    library_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("libraries.id"), primary_key=True)
    media_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("media.id"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class DefaultLibraryIntrinsic(Base):
    """The user put the media in their default library themselves."""

    __tablename__ = "default_library_intrinsics"
    default_library_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("libraries.id"), primary_key=True
    )
    media_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("media.id"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class DefaultLibraryClosureEdge(Base):
    """The media is in the default library because it is in a shared source library."""

    __tablename__ = "default_library_closure_edges"
    default_library_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("libraries.id"), primary_key=True
    )
    source_library_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("libraries.id"), primary_key=True, index=True
    )
    media_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("media.id"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class DefaultLibraryBackfillJob(Base):
    """Durable intent: materialize ``source_library_id`` into ``user_id``'s default library."""

    __tablename__ = "default_library_backfill_jobs"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'running', 'completed', 'failed')", name="status"),
        Index("ix_default_library_backfill_jobs_status_updated", "status", "updated_at"),
    )
    default_library_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    source_library_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error_code: Mapped[str | None] = mapped_column(String(64))
    # The durq job whose claim holds a `running` row: a later attempt of that same job
    # (after its lease was lost) may take the row back instead of skipping it.
    running_job_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


def create_schema(engine: Engine) -> None:
    """Create the Nexus tables beside durq's (idempotent; durq's come from ``durq migrate``)."""
    Base.metadata.create_all(engine)
