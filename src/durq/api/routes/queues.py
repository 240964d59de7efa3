"""``/v1/queues`` and ``/v1/workers``: health of each queue, pause and resume, workers."""

from __future__ import annotations

from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, Path, Query

from ...types import QUEUE_NAME_RE
from ...wire import dump_queues
from ..auth import Principal, require
from ..schemas import Data, QueueOut, QueueStateOut, WorkerOut
from ..service import Service, get_service
from . import AUTHENTICATED, error_responses

__all__ = ["router"]

log = structlog.get_logger("durq.api")

router = APIRouter(tags=["queues"], responses=error_responses(*AUTHENTICATED))

ServiceDep = Annotated[Service, Depends(get_service)]
QueuePath = Annotated[str, Path(pattern=QUEUE_NAME_RE.pattern, description="Queue name")]


@router.get(
    "/v1/queues",
    response_model=Data[list[QueueOut]],
    summary="Queues: counts by state, oldest and p95 age of ready jobs, paused, degraded",
)
def list_queues(
    service: ServiceDep, principal: Annotated[Principal, Depends(require("read"))]
) -> dict[str, Any]:
    """A key below operator sees its owner's jobs only: their counts, in the queues they
    are in (the ready jobs' ages, which are every owner's, are null)."""
    stats = service.app.queue_stats(created_by=principal.tenant)
    return {"data": dump_queues(stats)[: service.page_cap]}


def _set_paused(service: Service, name: str, paused: bool) -> dict[str, Any]:
    if paused:
        service.app.pause_queue(name)
    else:
        service.app.resume_queue(name)
    log.info("queue_paused" if paused else "queue_resumed", queue=name)
    return {"data": {"name": name, "paused": paused}}


@router.post(
    "/v1/queues/{name}/pause",
    response_model=Data[QueueStateOut],
    summary="Pause a queue: workers stop claiming its jobs",
)
def pause_queue(
    name: QueuePath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    return _set_paused(service, name, True)


@router.post(
    "/v1/queues/{name}/resume",
    response_model=Data[QueueStateOut],
    summary="Resume a paused queue",
)
def resume_queue(
    name: QueuePath,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    return _set_paused(service, name, False)


@router.get(
    "/v1/workers",
    response_model=Data[list[WorkerOut]],
    summary="Worker processes, newest first: alive, stopped or dead",
)
def list_workers(
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
    include_stopped: Annotated[bool, Query(description="Also list stopped and dead ones")] = True,
    limit: Annotated[int, Query(ge=1, description="Capped at DURQ_API_MAX_PAGE_SIZE")] = 100,
) -> dict[str, Any]:
    workers = service.app.list_workers(
        include_stopped=include_stopped, limit=service.page_size(limit)
    )
    return {"data": [w.to_dict() for w in workers]}
