"""``/internal/...``: operator routes for trusted callers only.

The whole prefix is guarded by one dependency on the router (one internal auth policy, no
route-local checks): ``X-Internal-Token`` first, then an operator key.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from ..auth import Principal, internal_only, require
from ..schemas import Data, InternalRequeueIn, RequeueOut
from ..service import Service, get_service
from . import AUTHENTICATED, error_responses
from .jobs import requeue_job

__all__ = ["router"]

router = APIRouter(
    prefix="/internal",
    tags=["internal"],
    dependencies=[Depends(internal_only)],
    responses=error_responses(*AUTHENTICATED),
)


@router.post(
    "/jobs/requeue",
    response_model=Data[RequeueOut],
    responses=error_responses(404, 410),
    summary="Requeue a job (the internal operator endpoint)",
)
def internal_requeue(
    body: InternalRequeueIn,
    service: Annotated[Service, Depends(get_service)],
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    return {"data": requeue_job(service, body.job_id)}
