"""Outbox events: ``GET /v1/jobs/{id}/events``, ``GET /v1/events``,
``POST /v1/events/{id}/redeliver``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query

from ...wire import EventOut, JobEventsOut
from ..auth import Principal, require
from ..schemas import MAX_JOB_ID, NUL_FREE, Data
from ..service import Service, get_service
from . import AUTHENTICATED, error_responses
from .jobs import JobIdPath, visible_job

__all__ = ["router"]

router = APIRouter(tags=["events"], responses=error_responses(*AUTHENTICATED))

ServiceDep = Annotated[Service, Depends(get_service)]
EventIdPath = Annotated[
    str, Path(min_length=1, max_length=64, pattern=NUL_FREE, description="The event's UUID")
]


@router.get(
    "/v1/jobs/{job_id}/events",
    response_model=Data[JobEventsOut],
    responses=error_responses(404, 410),
    summary="A job's outbox events in order, with its execution, refresh and delivery counters",
)
def job_events(
    job_id: JobIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
) -> dict[str, Any]:
    visible_job(service, principal, job_id)
    events = service.app.list_events(job_id=job_id, limit=service.page_cap)
    return {
        "data": {
            "counters": service.app.job_counters(job_id),
            "events": [e.to_dict() for e in events],
        }
    }


@router.get(
    "/v1/events",
    response_model=Data[list[EventOut]],
    summary="Outbox events (every owner's), oldest first; e.g. ?state=dead_letter",
)
def list_events(
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
    state: Annotated[
        Literal["pending", "delivering", "delivered", "dead_letter"] | None, Query()
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_JOB_ID, description="Page: after this sequence")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    events = service.app.list_events(state=state, after_id=after, limit=limit)
    return {"data": [e.to_dict() for e in events]}


@router.post(
    "/v1/events/{event_id}/redeliver",
    response_model=Data[EventOut],
    responses=error_responses(404),
    summary="Deliver an event again, its delivery attempts reset (operator)",
)
def redeliver(
    event_id: EventIdPath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    return {"data": service.app.redeliver(event_id).to_dict()}
