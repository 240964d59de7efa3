"""The ingest task's canonical-URL dedupe attaches the winner with provenance (seed 000)."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from durq import testing
from recipes.nexus_closure.models import Media
from recipes.nexus_closure.tasks import NexusRuntime

from .world import intrinsics, library_media, make_world


def _from_url(client: TestClient, user: uuid.UUID, url: str) -> uuid.UUID:
    response = client.post(
        "/media/from_url", json={"url": url}, headers={"X-Nexus-User-Id": str(user)}
    )
    assert response.status_code == 202, response.text
    return uuid.UUID(response.json()["data"]["id"])


def test_dedup_winner_attachment_writes_intrinsic_provenance(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w = make_world(runtime)
    winner = _from_url(client, w.owner, "https://example.com/article")
    assert [j.state for j in testing.drain(runtime.app)] == ["succeeded"]
    loser = _from_url(client, w.member, "https://EXAMPLE.com/article/#comments")
    assert library_media(runtime, w.member_default) == {loser}

    (ingest,) = testing.drain(runtime.app)
    assert ingest.state == "succeeded" and ingest.result == {"media_id": str(winner)}
    with runtime.sessions() as session:
        assert session.get(Media, loser) is None
        kept = session.get(Media, winner)
        assert kept is not None and kept.canonical_url == "https://example.com/article"
    assert library_media(runtime, w.member_default) == {winner}
    assert intrinsics(runtime, w.member_default) == {winner}
