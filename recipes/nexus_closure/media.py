"""Media writer paths that put media in the viewer's default library: upload init, upload
dedupe, ``/media/from_url`` creation and the web-article ingest dedupe. Each goes through
the shared default-provenance helper, so intrinsic provenance is never forgotten and these
paths never write closure edges."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from . import default_library_closure as closure
from .errors import ClosureError, NotFoundError
from .models import (
    DefaultLibraryClosureEdge,
    DefaultLibraryIntrinsic,
    LibraryMedia,
    Media,
)

__all__ = [
    "attach_dedupe_winner",
    "canonicalize_url",
    "confirm_upload",
    "create_media_from_url",
    "ingest_web_article",
    "init_upload",
]


def _viewer_default_library(session: Session, viewer_id: uuid.UUID) -> uuid.UUID:
    default_library_id = closure.default_library_id_for(session, viewer_id)
    if default_library_id is None:
        raise NotFoundError(f"user {viewer_id} has no default library; create the user first")
    return default_library_id


def canonicalize_url(url: str) -> str:
    """The ingest's stand-in for the fetched page's canonical URL: scheme and host in lower
    case, no fragment, no trailing slash."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ClosureError(f"url must be an absolute http(s) URL, got {url!r}")
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def init_upload(session: Session, viewer_id: uuid.UUID, filename: str) -> Media:
    """Upload init: a file-backed media, already in the viewer's default library."""
    media = Media(
        kind="file",
        title=filename,
        processing_status="pending_upload",
        created_by_user_id=viewer_id,
    )
    session.add(media)
    session.flush()
    closure.add_media_to_default_library(
        session, _viewer_default_library(session, viewer_id), media.id
    )
    return media


def create_media_from_url(session: Session, viewer_id: uuid.UUID, url: str) -> Media:
    """``POST /media/from_url``: a provisional web article in the viewer's default library."""
    canonicalize_url(url)  # refuse what the ingest could never fetch
    media = Media(
        kind="web_article",
        title=url,
        requested_url=url,
        processing_status="pending",
        created_by_user_id=viewer_id,
    )
    session.add(media)
    session.flush()
    closure.add_media_to_default_library(
        session, _viewer_default_library(session, viewer_id), media.id
    )
    return media


def attach_dedupe_winner(
    session: Session, actor_user_id: uuid.UUID, winner_id: uuid.UUID, loser_id: uuid.UUID
) -> None:
    """Attach the winner to the actor's default library (with intrinsic provenance) before
    deleting the loser, so the actor never loses access in between."""
    closure.add_media_to_default_library(
        session, _viewer_default_library(session, actor_user_id), winner_id
    )
    for entity, column in (
        (LibraryMedia, LibraryMedia.media_id),
        (DefaultLibraryIntrinsic, DefaultLibraryIntrinsic.media_id),
        (DefaultLibraryClosureEdge, DefaultLibraryClosureEdge.media_id),
        (Media, Media.id),
    ):
        session.execute(
            delete(entity).where(column == loser_id).execution_options(synchronize_session=False)
        )


def _media(session: Session, media_id: uuid.UUID) -> Media:
    media = session.get(Media, media_id)
    if media is None:
        raise NotFoundError(f"media {media_id} does not exist (deduplicated or deleted)")
    return media


def confirm_upload(
    session: Session, viewer_id: uuid.UUID, media_id: uuid.UUID, content_sha256: str
) -> uuid.UUID:
    """The uploaded bytes are known: an earlier media with the same content wins. Returns
    the id the viewer should use from now on."""
    media = _media(session, media_id)
    winner = session.execute(
        select(Media.id)
        .where(Media.content_sha256 == content_sha256, Media.id != media_id)
        .order_by(Media.created_at)
        .limit(1)
    ).scalar_one_or_none()
    if winner is not None:
        attach_dedupe_winner(session, viewer_id, winner, media_id)
        return winner
    media.content_sha256 = content_sha256
    media.processing_status = "ready"
    session.flush()
    return media.id


def ingest_web_article(
    session: Session, media_id: uuid.UUID, actor_user_id: uuid.UUID
) -> uuid.UUID:
    """Ingest a provisional article: if another media already has its canonical URL, that
    one wins (attached to the actor's default library, then the loser is deleted)."""
    media = _media(session, media_id)
    canonical = canonicalize_url(media.requested_url or "")
    winner = session.execute(
        select(Media.id)
        .where(Media.canonical_url == canonical, Media.id != media_id)
        .order_by(Media.created_at)
        .limit(1)
    ).scalar_one_or_none()
    if winner is not None:
        attach_dedupe_winner(session, actor_user_id, winner, media_id)
        return winner
    media.canonical_url = canonical
    media.processing_status = "ready"
    session.flush()
    return media.id
