"""Default-library provenance: intrinsic rows, closure edges, materialized default rows
and their gc. Part of ``default_library_closure`` (which re-exports all of it); the same
contract holds: the caller's ``Session`` and transaction, idempotent inserts."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, exists, inspect, literal, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from .models import (
    DefaultLibraryClosureEdge,
    DefaultLibraryIntrinsic,
    Library,
    LibraryMedia,
    Membership,
    UtcDateTime,
    utcnow,
)

__all__ = [
    "add_media_to_default_library",
    "add_media_to_non_default_library",
    "default_library_id_for",
    "ensure_library_media",
    "gc_default_library_media",
    "insert_ignore",
    "lock_membership",
    "materialize_source_library",
    "remove_media_from_default_library",
    "remove_media_from_non_default_library",
    "remove_member_closure",
]

Edge = DefaultLibraryClosureEdge
Intrinsic = DefaultLibraryIntrinsic

# ---- idempotent inserts ----------------------------------------------------------------


def _insert(session: Session, entity: Any) -> Any:
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(entity)


def insert_ignore(session: Session, entity: Any, values: dict[str, Any]) -> None:
    session.execute(_insert(session, entity).values(**values).on_conflict_do_nothing())


def _insert_select_ignore(
    session: Session, entity: Any, columns: list[str], source: Select[Any]
) -> int:
    stmt = _insert(session, entity).from_select(columns, source).on_conflict_do_nothing()
    # RETURNING counts what was inserted on every driver (psycopg's rowcount here is -1).
    key_column = inspect(entity).primary_key[0]
    return len(session.execute(stmt.returning(key_column)).all())


def ensure_library_media(session: Session, library_id: uuid.UUID, media_id: uuid.UUID) -> None:
    """The base ``library_media`` row, idempotently (no provenance: callers add that)."""
    values = {"library_id": library_id, "media_id": media_id, "created_at": utcnow()}
    insert_ignore(session, LibraryMedia, values)


def _lit(value: Any, type_: Any) -> Any:
    return literal(value, type_)


# ---- provenance helpers ----------------------------------------------------------------


def default_library_id_for(session: Session, user_id: uuid.UUID) -> uuid.UUID | None:
    stmt = select(Library.id).where(Library.owner_user_id == user_id, Library.is_default)
    return session.execute(stmt).scalar_one_or_none()


def add_media_to_default_library(
    session: Session, default_library_id: uuid.UUID, media_id: uuid.UUID
) -> None:
    """The user's own add: the row and its intrinsic provenance. Never a closure edge."""
    ensure_library_media(session, default_library_id, media_id)
    values = {
        "default_library_id": default_library_id,
        "media_id": media_id,
        "created_at": utcnow(),
    }
    insert_ignore(session, Intrinsic, values)


def gc_default_library_media(
    session: Session, default_library_id: uuid.UUID, media_ids: Iterable[uuid.UUID]
) -> int:
    """Delete default rows that neither an intrinsic nor a closure edge justifies."""
    ids = list(dict.fromkeys(media_ids))
    if not ids:
        return 0
    justified_by_intrinsic = exists().where(
        Intrinsic.default_library_id == LibraryMedia.library_id,
        Intrinsic.media_id == LibraryMedia.media_id,
    )
    justified_by_edge = exists().where(
        Edge.default_library_id == LibraryMedia.library_id, Edge.media_id == LibraryMedia.media_id
    )
    stmt = delete(LibraryMedia).where(
        LibraryMedia.library_id == default_library_id,
        LibraryMedia.media_id.in_(ids),
        ~justified_by_intrinsic,
        ~justified_by_edge,
    )
    result = session.execute(stmt.execution_options(synchronize_session=False))
    return int(getattr(result, "rowcount", 0) or 0)


def remove_media_from_default_library(
    session: Session, default_library_id: uuid.UUID, media_id: uuid.UUID
) -> None:
    """d-010: drop the intrinsic, then gc. Never cascades into other libraries."""
    session.execute(
        delete(Intrinsic)
        .where(Intrinsic.default_library_id == default_library_id, Intrinsic.media_id == media_id)
        .execution_options(synchronize_session=False)
    )
    gc_default_library_media(session, default_library_id, [media_id])


def _member_default_libraries(source_library_id: uuid.UUID) -> Select[Any]:
    return (
        select(Library.id)
        .join(Membership, Membership.user_id == Library.owner_user_id)
        .where(Membership.library_id == source_library_id, Library.is_default)
    )


def _materialize_edges(
    session: Session, source_library_id: uuid.UUID, *conditions: ColumnElement[bool]
) -> int:
    rows = select(Edge.default_library_id, Edge.media_id, _lit(utcnow(), UtcDateTime)).where(
        Edge.source_library_id == source_library_id, *conditions
    )
    return _insert_select_ignore(
        session, LibraryMedia, ["library_id", "media_id", "created_at"], rows
    )


def add_media_to_non_default_library(
    session: Session, source_library_id: uuid.UUID, media_id: uuid.UUID
) -> None:
    """Closure edges for every current member with a default library, then their rows."""
    # Share-lock the memberships so a concurrent removal waits for these edges (d-008).
    session.execute(
        select(Membership.user_id)
        .where(Membership.library_id == source_library_id)
        .with_for_update(read=True)
    ).all()
    defaults = _member_default_libraries(source_library_id).subquery()
    edges = select(
        defaults.c.id,
        _lit(source_library_id, Library.id.type),
        _lit(media_id, Library.id.type),
        _lit(utcnow(), UtcDateTime),
    ).where(defaults.c.id.is_not(None))
    _insert_select_ignore(
        session,
        Edge,
        ["default_library_id", "source_library_id", "media_id", "created_at"],
        edges,
    )
    _materialize_edges(session, source_library_id, Edge.media_id == media_id)


def remove_media_from_non_default_library(
    session: Session, source_library_id: uuid.UUID, media_id: uuid.UUID
) -> None:
    """Remove the source's edges for this media and gc the default rows they justified."""
    affected = session.execute(
        select(Edge.default_library_id).where(
            Edge.source_library_id == source_library_id, Edge.media_id == media_id
        )
    ).scalars()
    defaults = list(affected)
    session.execute(
        delete(Edge)
        .where(Edge.source_library_id == source_library_id, Edge.media_id == media_id)
        .execution_options(synchronize_session=False)
    )
    for default_library_id in defaults:
        gc_default_library_media(session, default_library_id, [media_id])


def remove_member_closure(
    session: Session, source_library_id: uuid.UUID, user_id: uuid.UUID
) -> int:
    """Membership removal: drop edges ``(default(user), source, *)`` and gc their rows."""
    default_library_id = default_library_id_for(session, user_id)
    if default_library_id is None:
        return 0
    where = (
        Edge.default_library_id == default_library_id,
        Edge.source_library_id == source_library_id,
    )
    media_ids = list(session.execute(select(Edge.media_id).where(*where)).scalars())
    session.execute(delete(Edge).where(*where).execution_options(synchronize_session=False))
    return gc_default_library_media(session, default_library_id, media_ids)


def lock_membership(session: Session, source_library_id: uuid.UUID, user_id: uuid.UUID) -> bool:
    """Lock ``(source_library_id, user_id)`` for the transaction; False if it is absent.

    PostgreSQL: ``SELECT ... FOR UPDATE``. SQLite: the session began ``BEGIN IMMEDIATE``
    and already holds the database's write lock, which is stronger.
    """
    stmt = (
        select(Membership.role)
        .where(Membership.library_id == source_library_id, Membership.user_id == user_id)
        .with_for_update()
    )
    return session.execute(stmt).first() is not None


def materialize_source_library(
    session: Session, default_library_id: uuid.UUID, source_library_id: uuid.UUID
) -> int:
    """Backfill: edges for every media of the source, then the default rows. Idempotent."""
    edges = select(
        _lit(default_library_id, Library.id.type),
        _lit(source_library_id, Library.id.type),
        LibraryMedia.media_id,
        _lit(utcnow(), UtcDateTime),
    ).where(LibraryMedia.library_id == source_library_id)
    inserted = _insert_select_ignore(
        session,
        Edge,
        ["default_library_id", "source_library_id", "media_id", "created_at"],
        edges,
    )
    _materialize_edges(session, source_library_id, Edge.default_library_id == default_library_id)
    return inserted
