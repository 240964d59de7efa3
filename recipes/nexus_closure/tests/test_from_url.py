"""``POST /media/from_url`` keeps intrinsic provenance (seed 000)."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from durq import testing
from recipes.nexus_closure.tasks import INGEST_TASK_NAME, NexusRuntime

from .world import edges, intrinsics, library_media, make_world


def test_from_url_creates_default_library_intrinsic_row(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w = make_world(runtime)
    response = client.post(
        "/media/from_url",
        json={"url": "https://example.com/essay"},
        headers={"X-Nexus-User-Id": str(w.member)},
    )
    assert response.status_code == 202, response.text
    media = uuid.UUID(response.json()["data"]["id"])
    assert library_media(runtime, w.member_default) == {media}
    assert intrinsics(runtime, w.member_default) == {media}
    assert edges(runtime, media_id=media) == set()
    # the ingest was enqueued with the media, in the same transaction, on queue `ingest`
    testing.assert_enqueued(
        runtime.app, INGEST_TASK_NAME, args={"media_id": str(media)}, queue="ingest", count=1
    )
