"""``POST /internal/libraries/backfill-jobs/requeue``: transport only, one service call.

No auth here (d-011): the internal-header policy is the middleware's, for every
``/internal/`` path at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header

from . import default_library_closure as closure
from .deps import get_runtime, success_response
from .schemas import DefaultLibraryBackfillJobOut, RequeueDefaultLibraryBackfillJobRequest
from .tasks import NexusRuntime

__all__ = ["REQUEUE_PATH", "router"]

REQUEUE_PATH = "/internal/libraries/backfill-jobs/requeue"

router = APIRouter(tags=["internal"])


@router.post(REQUEUE_PATH)
def requeue_default_library_backfill_job(
    body: RequeueDefaultLibraryBackfillJobRequest,
    runtime: Annotated[NexusRuntime, Depends(get_runtime)],
    request_id: Annotated[str | None, Header(alias="X-Request-Id")] = None,
) -> dict[str, Any]:
    key = closure.BackfillKey(body.default_library_id, body.source_library_id, body.user_id)
    with runtime.sessions.begin() as session:
        outcome = closure.requeue_backfill_job(session, key, app=runtime.app, request_id=request_id)
    row = outcome.row
    out = DefaultLibraryBackfillJobOut(
        default_library_id=key.default_library_id,
        source_library_id=key.source_library_id,
        user_id=key.user_id,
        status=row.status,
        attempts=row.attempts,
        last_error_code=row.last_error_code,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
        idempotent=outcome.idempotent,
        enqueue_dispatched=outcome.enqueue_dispatched,
    )
    return success_response(out)
