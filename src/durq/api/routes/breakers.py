"""``/v1/breakers`` and ``/v1/alerts``: circuit breakers and the alerts durq raised."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import structlog
from fastapi import APIRouter, Depends, Path, Query

from ...wire import AlertOut, BreakerOut
from ..auth import Principal, require
from ..schemas import MAX_JOB_ID, NUL_FREE, Data
from ..service import Service, get_service
from . import AUTHENTICATED, error_responses

#: Alert ids are 64-bit like job ids: a larger one is refused before it reaches the database.
MAX_ALERT_ID = MAX_JOB_ID

__all__ = ["router"]

log = structlog.get_logger("durq.api")

router = APIRouter(tags=["breakers"], responses=error_responses(*AUTHENTICATED))

ServiceDep = Annotated[Service, Depends(get_service)]


@router.get(
    "/v1/breakers",
    response_model=Data[list[BreakerOut]],
    summary="Circuit breakers, open ones first",
)
def list_breakers(
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
    failing: Annotated[bool, Query(description="Only keys counting failures or open")] = False,
    limit: Annotated[int, Query(ge=1, description="Capped at DURQ_API_MAX_PAGE_SIZE")] = 100,
) -> dict[str, Any]:
    found = service.app.list_breakers(failing_only=failing, limit=service.page_size(limit))
    return {"data": [b.to_dict() for b in found]}


@router.post(
    "/v1/breakers/{key}/reset",
    response_model=Data[BreakerOut],
    summary="Close a breaker now: failures to 0, its paused jobs due, its alert resolved",
    responses=error_responses(404),
)
def reset_breaker(
    key: Annotated[
        str, Path(min_length=1, max_length=255, pattern=NUL_FREE, description="Breaker key")
    ],
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    breaker = service.app.reset_breaker(key)
    log.info("breaker_reset", key=key, by=principal.owner)
    return {"data": breaker.to_dict()}


@router.get(
    "/v1/alerts",
    response_model=Data[list[AlertOut]],
    summary="Alerts raised by breakers, backlog guardrails and dead letters, newest first",
)
def list_alerts(
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("read"))],
    state: Annotated[Literal["open", "resolved", "all"], Query()] = "open",
    limit: Annotated[int, Query(ge=1, description="Capped at DURQ_API_MAX_PAGE_SIZE")] = 100,
) -> dict[str, Any]:
    found = service.app.list_alerts(state=state, limit=service.page_size(limit))
    return {"data": [a.to_dict() for a in found]}


@router.post(
    "/v1/alerts/{alert_id}/ack",
    response_model=Data[AlertOut],
    summary="Acknowledge an alert (it stays open until its cause clears)",
    responses=error_responses(404),
)
def ack_alert(
    alert_id: Annotated[int, Path(ge=1, le=MAX_ALERT_ID, description="The alert's id")],
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require("operate"))],
) -> dict[str, Any]:
    alert = service.app.ack_alert(alert_id)
    log.info("alert_acked", alert_id=alert_id, by=principal.owner)
    return {"data": alert.to_dict()}
