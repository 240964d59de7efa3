"""Upload writer paths keep intrinsic provenance (seed 000)."""

from __future__ import annotations

from recipes.nexus_closure.media import confirm_upload, init_upload
from recipes.nexus_closure.models import Media
from recipes.nexus_closure.tasks import NexusRuntime

from .world import edges, intrinsics, library_media, make_world


def test_upload_init_creates_default_library_intrinsic_row(runtime: NexusRuntime) -> None:
    w = make_world(runtime)
    with runtime.sessions.begin() as session:
        media = init_upload(session, w.member, "notes.pdf").id
    assert library_media(runtime, w.member_default) == {media}
    assert intrinsics(runtime, w.member_default) == {media}
    assert edges(runtime, media_id=media) == set()  # a default-library path: never an edge


def test_ingest_duplicate_keeps_winner_attached_with_intrinsic(runtime: NexusRuntime) -> None:
    w = make_world(runtime)
    digest = "ab" * 32
    with runtime.sessions.begin() as session:
        first = init_upload(session, w.owner, "paper.pdf").id
        assert confirm_upload(session, w.owner, first, digest) == first
    with runtime.sessions.begin() as session:
        duplicate = init_upload(session, w.member, "same-paper.pdf").id
    with runtime.sessions.begin() as session:
        kept = confirm_upload(session, w.member, duplicate, digest)
    assert kept == first
    with runtime.sessions() as session:
        assert session.get(Media, duplicate) is None  # the loser is gone
    assert library_media(runtime, w.member_default) == {first}
    assert intrinsics(runtime, w.member_default) == {first}
    assert library_media(runtime, w.owner_default) == {first}  # the winner's owner keeps it
