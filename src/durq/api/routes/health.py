"""``/healthz`` (alive), ``/readyz`` (database reachable, schema current), ``/metrics``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from ...errors import SchemaOutOfDate
from ..auth import metrics_access
from ..errors import error_response
from ..schemas import Data, StatusOut
from ..service import Service, get_service
from . import error_responses

__all__ = ["router"]

router = APIRouter(tags=["health"])

ServiceDep = Annotated[Service, Depends(get_service)]


@router.get(
    "/healthz",
    response_model=Data[StatusOut],
    response_model_exclude_none=True,
    summary="Liveness (no auth)",
)
def healthz() -> dict[str, Any]:
    return {"data": {"status": "ok"}}


@router.get(
    "/readyz",
    response_model=Data[StatusOut],
    responses=error_responses(503),
    summary="Readiness: the database answers and every migration is applied (no auth)",
)
def readyz(service: ServiceDep) -> Any:
    app = service.app
    try:
        with app.driver.read() as ex:
            app.driver.ping(ex)
    except Exception as exc:  # any failure to reach the database means "not ready"
        return error_response(
            503,
            "E_DATABASE_UNAVAILABLE",
            f"database unreachable: {exc}. Check DURQ_DATABASE_URL and that the database is up",
        )
    try:
        app.check_schema()
    except SchemaOutOfDate as exc:
        return error_response(503, "E_SCHEMA_OUT_OF_DATE", f"migrations pending: {exc}")
    except Exception as exc:
        return error_response(503, "E_DATABASE_UNAVAILABLE", f"database unreachable: {exc}")
    return JSONResponse({"data": {"status": "ready", "database": "ok", "migrations": "current"}})


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {}},
            "description": "Prometheus text exposition format",
        },
        **error_responses(401, 403, 429),
    },
    summary="Prometheus metrics (an API key only with DURQ_METRICS_AUTH=true)",
)
def metrics(
    service: ServiceDep, access: Annotated[None, Depends(metrics_access)] = None
) -> Response:
    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)
