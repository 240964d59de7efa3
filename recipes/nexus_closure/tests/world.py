"""Building blocks for the tests: a small world of users and libraries, and readers of
the provenance tables."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from recipes.nexus_closure import default_library_closure as closure
from recipes.nexus_closure.libraries import accept_library_member, create_library, create_user
from recipes.nexus_closure.models import (
    DefaultLibraryBackfillJob,
    DefaultLibraryClosureEdge,
    DefaultLibraryIntrinsic,
    LibraryMedia,
    Media,
)
from recipes.nexus_closure.tasks import NexusRuntime

__all__ = [
    "World",
    "backfill_row",
    "edges",
    "intrinsics",
    "library_media",
    "make_media",
    "make_world",
]

Edge = tuple[uuid.UUID, uuid.UUID, uuid.UUID]


@dataclass(frozen=True)
class World:
    owner: uuid.UUID
    member: uuid.UUID
    owner_default: uuid.UUID
    member_default: uuid.UUID
    library: uuid.UUID  # shared, owned by `owner`, `member` is a member

    @property
    def member_key(self) -> closure.BackfillKey:
        return closure.BackfillKey(self.member_default, self.library, self.member)


def make_world(runtime: NexusRuntime, *, dispatch: bool = False) -> World:
    """Owner and member of one shared library; the member's accept wrote a pending backfill
    row (and, with ``dispatch``, its durq job in the same transaction)."""
    with runtime.sessions.begin() as session:
        owner = create_user(session, f"owner-{uuid.uuid4().hex[:8]}@example.com").id
        member = create_user(session, f"member-{uuid.uuid4().hex[:8]}@example.com").id
        library = create_library(session, owner, "Shared").id
        accept_library_member(session, library, member, app=runtime.app if dispatch else None)
        owner_default = closure.default_library_id_for(session, owner)
        member_default = closure.default_library_id_for(session, member)
    assert owner_default is not None and member_default is not None
    return World(owner, member, owner_default, member_default, library)


def make_media(runtime: NexusRuntime, creator: uuid.UUID, title: str = "A paper") -> uuid.UUID:
    with runtime.sessions.begin() as session:
        media = Media(
            kind="file", title=title, processing_status="ready", created_by_user_id=creator
        )
        session.add(media)
        session.flush()
        return media.id


def library_media(runtime: NexusRuntime, library_id: uuid.UUID) -> set[uuid.UUID]:
    with runtime.sessions() as session:
        stmt = select(LibraryMedia.media_id).where(LibraryMedia.library_id == library_id)
        return set(session.execute(stmt).scalars())


def intrinsics(runtime: NexusRuntime, default_library_id: uuid.UUID) -> set[uuid.UUID]:
    with runtime.sessions() as session:
        stmt = select(DefaultLibraryIntrinsic.media_id).where(
            DefaultLibraryIntrinsic.default_library_id == default_library_id
        )
        return set(session.execute(stmt).scalars())


def edges(runtime: NexusRuntime, **where: uuid.UUID) -> set[Edge]:
    """Closure edges ``(default, source, media)``, filtered by column values."""
    e = DefaultLibraryClosureEdge
    stmt = select(e.default_library_id, e.source_library_id, e.media_id).filter_by(**where)
    with runtime.sessions() as session:
        return {(d, s, m) for d, s, m in session.execute(stmt)}


def backfill_row(runtime: NexusRuntime, key: closure.BackfillKey) -> dict[str, Any] | None:
    j = DefaultLibraryBackfillJob
    stmt = select(j.status, j.attempts, j.last_error_code, j.updated_at, j.finished_at).where(
        key.where()
    )
    with runtime.sessions() as session:
        found = session.execute(stmt).first()
    if found is None:
        return None
    return dict(
        zip(
            ("status", "attempts", "last_error_code", "updated_at", "finished_at"),
            found,
            strict=True,
        )
    )
