"""Public media routes (``/media/from_url``): the public contract is unchanged; the
provisional media is created through the shared default-provenance helper."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from .deps import get_runtime, success_response, viewer_id
from .media import create_media_from_url
from .schemas import FromUrlRequest, MediaOut
from .tasks import INGEST_TASK_NAME, NexusRuntime

__all__ = ["router"]

router = APIRouter(tags=["media"])


@router.post("/media/from_url", status_code=202)
def media_from_url(
    body: FromUrlRequest,
    runtime: Annotated[NexusRuntime, Depends(get_runtime)],
    viewer: Annotated[uuid.UUID, Depends(viewer_id)],
) -> dict[str, Any]:
    with runtime.sessions.begin() as session:
        media = create_media_from_url(session, viewer, body.url)
        # The ingest runs iff the media exists: enqueued in the same transaction.
        runtime.app.enqueue(
            INGEST_TASK_NAME,
            {"media_id": str(media.id), "actor_user_id": str(viewer)},
            queue="ingest",
            connection=session,
        )
        out = MediaOut(
            id=media.id,
            kind=media.kind,
            title=media.title,
            processing_status=media.processing_status,
            ingest_enqueued=True,
        )
    return success_response(out)
