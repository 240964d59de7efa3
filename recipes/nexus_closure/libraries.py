"""Library and membership writer paths; every closure effect goes through
``default_library_closure`` (d-002). Callers own the transaction."""

from __future__ import annotations

import uuid

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

import durq

from . import default_library_closure as closure
from .errors import ConflictError, ForbiddenError, NotFoundError
from .models import Library, LibraryMedia, Media, Membership, User

__all__ = [
    "accept_library_member",
    "add_media_to_library",
    "create_library",
    "create_user",
    "remove_library_member",
    "remove_media_from_library",
]

MANAGER_ROLES = ("owner", "admin")


def create_user(session: Session, email: str) -> User:
    """A user and their default library (exactly one per user)."""
    user = User(email=email)
    session.add(user)
    session.flush()
    session.add(Library(owner_user_id=user.id, name="My Library", is_default=True))
    session.flush()
    return user


def create_library(session: Session, owner_id: uuid.UUID, name: str) -> Library:
    """A shared (non-default) library; its creator is its owner member."""
    library = Library(owner_user_id=owner_id, name=name, is_default=False)
    session.add(library)
    session.flush()
    session.add(Membership(library_id=library.id, user_id=owner_id, role="owner"))
    session.flush()
    return library


def _library(session: Session, library_id: uuid.UUID) -> Library:
    library = session.get(Library, library_id)
    if library is None:
        raise NotFoundError(f"library {library_id} does not exist")
    return library


def _role(session: Session, library_id: uuid.UUID, user_id: uuid.UUID) -> str | None:
    stmt = select(Membership.role).where(
        Membership.library_id == library_id, Membership.user_id == user_id
    )
    return session.execute(stmt).scalar_one_or_none()


def accept_library_member(
    session: Session,
    library_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    role: str = "member",
    app: durq.App | None = None,
    request_id: str | None = None,
) -> bool:
    """Membership accept (pr-04's path): the member, a pending backfill row, and its
    dispatch in the same transaction. Returns whether a durq job was written."""
    library = _library(session, library_id)
    if library.is_default:
        raise ConflictError("a default library is personal and cannot have members")
    session.add(Membership(library_id=library_id, user_id=user_id, role=role))
    session.flush()
    default_library_id = closure.default_library_id_for(session, user_id)
    if default_library_id is None:
        return False
    key = closure.BackfillKey(default_library_id, library_id, user_id)
    closure.upsert_backfill_job_pending(session, key)
    if app is None:
        return False
    return closure.enqueue_backfill_job(
        default_library_id, library_id, user_id, request_id, app=app, session=session
    )


def add_media_to_library(
    session: Session, viewer_id: uuid.UUID, library_id: uuid.UUID, media_id: uuid.UUID
) -> None:
    """Members (any role) may add. Default target: intrinsic + row, never an edge.
    Shared target: the row, then edges and default rows for every current member."""
    library = _library(session, library_id)
    if _role(session, library_id, viewer_id) is None and library.owner_user_id != viewer_id:
        raise NotFoundError(f"library {library_id} does not exist")
    if session.get(Media, media_id) is None:
        raise NotFoundError(f"media {media_id} does not exist")
    if library.is_default:
        closure.add_media_to_default_library(session, library_id, media_id)
        return
    closure.ensure_library_media(session, library_id, media_id)
    closure.add_media_to_non_default_library(session, library_id, media_id)


def remove_media_from_library(
    session: Session, viewer_id: uuid.UUID, library_id: uuid.UUID, media_id: uuid.UUID
) -> None:
    """Default target: the intrinsic only, then gc (d-010: no cascade anywhere else).
    Shared target: the row, the source's edges, then gc of the defaults they justified."""
    library = _library(session, library_id)
    if library.is_default:
        if library.owner_user_id != viewer_id:
            raise NotFoundError(f"library {library_id} does not exist")
        closure.remove_media_from_default_library(session, library_id, media_id)
        return
    role = _role(session, library_id, viewer_id)
    if role is None:
        raise NotFoundError(f"library {library_id} does not exist")
    if role not in MANAGER_ROLES:
        raise ForbiddenError("only the library's owner or an admin may remove media from it")
    session.execute(
        delete(LibraryMedia)
        .where(LibraryMedia.library_id == library_id, LibraryMedia.media_id == media_id)
        .execution_options(synchronize_session=False)
    )
    closure.remove_media_from_non_default_library(session, library_id, media_id)


def remove_library_member(
    session: Session, actor_id: uuid.UUID, library_id: uuid.UUID, user_id: uuid.UUID
) -> bool:
    """Lock the membership, delete it, drop the member's closure edges and gc, and delete
    the matching backfill row (d-009), all in the caller's transaction. An absent member
    is an idempotent no-op (False)."""
    library = _library(session, library_id)
    if library.is_default:
        raise ConflictError("a default library has no members to remove")
    actor_role = _role(session, library_id, actor_id)
    if actor_id != user_id and actor_role not in MANAGER_ROLES:
        raise ForbiddenError("only the library's owner or an admin may remove other members")
    if not closure.lock_membership(session, library_id, user_id):
        return False
    role = _role(session, library_id, user_id)
    if role == "owner":
        raise ConflictError("the owner cannot be removed; transfer ownership first")
    if role == "admin":
        admins = session.execute(
            select(func.count()).where(
                Membership.library_id == library_id, Membership.role.in_(MANAGER_ROLES)
            )
        ).scalar_one()
        if admins <= 1:
            raise ConflictError("the last admin cannot be removed; promote another first")
    session.execute(
        delete(Membership)
        .where(Membership.library_id == library_id, Membership.user_id == user_id)
        .execution_options(synchronize_session=False)
    )
    closure.remove_member_closure(session, library_id, user_id)
    default_library_id = closure.default_library_id_for(session, user_id)
    if default_library_id is not None:
        closure.delete_backfill_job(
            session, closure.BackfillKey(default_library_id, library_id, user_id)
        )
    return True
