"""Library and membership writer paths keep intrinsic, closure and gc rules (seed 000)."""

from __future__ import annotations

from recipes.nexus_closure.libraries import (
    accept_library_member,
    add_media_to_library,
    create_library,
    remove_library_member,
    remove_media_from_library,
)
from recipes.nexus_closure.tasks import NexusRuntime

from .world import backfill_row, edges, intrinsics, library_media, make_media, make_world


def test_add_media_non_default_creates_closure_edges_and_default_materialization(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    media = make_media(runtime, w.owner)
    for _ in range(2):  # a second add is a no-op: every insert is idempotent
        with runtime.sessions.begin() as session:
            add_media_to_library(session, w.member, w.library, media)
        assert library_media(runtime, w.library) == {media}
        assert edges(runtime, source_library_id=w.library) == {
            (w.owner_default, w.library, media),
            (w.member_default, w.library, media),
        }
        assert library_media(runtime, w.owner_default) == {media}
        assert library_media(runtime, w.member_default) == {media}
    # closure-derived, not the users' own adds
    assert intrinsics(runtime, w.owner_default) == intrinsics(runtime, w.member_default) == set()


def test_remove_media_non_default_deletes_source_edges_and_gcs_default_row(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    media = make_media(runtime, w.owner)
    with runtime.sessions.begin() as session:
        add_media_to_library(session, w.member, w.library, media)
        add_media_to_library(session, w.owner, w.owner_default, media)  # owner's own add
    assert media in library_media(runtime, w.member_default)
    with runtime.sessions.begin() as session:
        remove_media_from_library(session, w.owner, w.library, media)
    assert library_media(runtime, w.library) == set()
    assert edges(runtime, source_library_id=w.library) == set()
    assert library_media(runtime, w.member_default) == set()  # no intrinsic: gc'd
    assert library_media(runtime, w.owner_default) == {media}  # intrinsic keeps it


def test_remove_media_from_default_removes_intrinsic_but_keeps_row_when_closure_exists(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    media = make_media(runtime, w.member)
    with runtime.sessions.begin() as session:
        add_media_to_library(session, w.member, w.member_default, media)
        add_media_to_library(session, w.member, w.library, media)
    assert intrinsics(runtime, w.member_default) == {media}
    with runtime.sessions.begin() as session:
        remove_media_from_library(session, w.member, w.member_default, media)
    assert intrinsics(runtime, w.member_default) == set()
    assert library_media(runtime, w.member_default) == {media}
    assert (w.member_default, w.library, media) in edges(runtime)
    # d-010: no cascade into the shared library or the other member's default
    assert library_media(runtime, w.library) == {media}
    assert library_media(runtime, w.owner_default) == {media}


def test_remove_media_from_default_row_is_gc_after_closure_removed(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    media = make_media(runtime, w.member)
    with runtime.sessions.begin() as session:
        second = create_library(session, w.owner, "Second shared").id
        accept_library_member(session, second, w.member)
        add_media_to_library(session, w.member, w.member_default, media)
        add_media_to_library(session, w.member, w.library, media)
        add_media_to_library(session, w.member, second, media)
        remove_media_from_library(session, w.member, w.member_default, media)
    assert intrinsics(runtime, w.member_default) == set()  # closure only from here on
    with runtime.sessions.begin() as session:
        remove_media_from_library(session, w.owner, w.library, media)
    assert library_media(runtime, w.member_default) == {media}  # `second` still justifies it
    with runtime.sessions.begin() as session:
        remove_media_from_library(session, w.owner, second, media)
    assert edges(runtime, default_library_id=w.member_default) == set()
    assert library_media(runtime, w.member_default) == set()


def test_remove_library_member_deletes_member_closure_edges_and_gcs_rows(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    only_shared, also_intrinsic, also_elsewhere = (make_media(runtime, w.owner) for _ in "abc")
    with runtime.sessions.begin() as session:
        other = create_library(session, w.owner, "Other shared").id
        accept_library_member(session, other, w.member)
        for media in (only_shared, also_intrinsic, also_elsewhere):
            add_media_to_library(session, w.owner, w.library, media)
        add_media_to_library(session, w.member, w.member_default, also_intrinsic)
        add_media_to_library(session, w.owner, other, also_elsewhere)
    with runtime.sessions.begin() as session:
        assert remove_library_member(session, w.owner, w.library, w.member) is True
    assert edges(runtime, default_library_id=w.member_default, source_library_id=w.library) == (
        set()
    )
    assert library_media(runtime, w.member_default) == {also_intrinsic, also_elsewhere}
    assert len(edges(runtime, default_library_id=w.owner_default)) == 4  # owner untouched
    with runtime.sessions.begin() as session:  # absent member: idempotent no-op
        assert remove_library_member(session, w.owner, w.library, w.member) is False


def test_remove_library_member_deletes_matching_backfill_job_row(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    with runtime.sessions.begin() as session:
        other = create_library(session, w.owner, "Other shared").id
        accept_library_member(session, other, w.member)
    other_key = type(w.member_key)(w.member_default, other, w.member)
    assert backfill_row(runtime, w.member_key) is not None

    session = runtime.sessions()
    with session.begin():
        assert remove_library_member(session, w.owner, w.library, w.member)
        session.rollback()  # one transaction: undoing it brings both back
    assert backfill_row(runtime, w.member_key) is not None

    with runtime.sessions.begin() as session:
        remove_library_member(session, w.owner, w.library, w.member)
    assert backfill_row(runtime, w.member_key) is None
    other_row = backfill_row(runtime, other_key)  # another library's intent stays
    assert other_row is not None and other_row["status"] == "pending"
