"""``create_app``: the HTTP service's composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..app import App
from ..dashboard import create_dashboard
from ..errors import DurqError
from ..settings import Settings
from .context import BodyLimit, RequestContext
from .document import refined_openapi
from .errors import install_error_handlers
from .routes import breakers, events, health, internal, jobs, keys, queues
from .service import Service
from .strict import RouteTable, StrictQuery

log = structlog.get_logger("durq.api")

__all__ = ["create_app"]

DESCRIPTION = """\
Submit, watch and operate durq jobs over HTTP.

Authenticate with an API key (`durq keys create --owner NAME --role ROLE`) sent as
`Authorization: Bearer <key>` or `X-API-Key: <key>`. Successes are `{"data": ...}`;
errors are `{"error": {"code", "message", "request_id"}}` with stable codes.
Every response carries `X-Request-ID`.

A query parameter is given once unless this document makes it an array (`state`): a
repeated one is refused (422). `OPTIONS` on a path answers 204 with `Allow`, and a method
a path does not take answers 405 with the same `Allow`. A body is at most
`DURQ_API_MAX_BODY_BYTES` (413); a job's `args` at most `DURQ_MAX_ARGS_BYTES` of JSON and
`DURQ_MAX_JSON_DEPTH` levels deep (422); a body that is not JSON answers 400 `E_BAD_JSON`.
"""


def create_app(app: App, settings: Settings | None = None) -> FastAPI:
    """A FastAPI application serving ``app``'s jobs, with the web dashboard at ``/ui``;
    mount it in your own app if you like: ``main.mount("/durq", create_app(durq_app))``."""
    settings = settings or app.settings
    service = Service.build(app, settings)

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        if settings.env == "dev":
            try:
                await run_in_threadpool(service.ensure_bootstrap)
            except DurqError as exc:  # serve anyway: /readyz says what is wrong until fixed
                log.warning("bootstrap_keys_skipped", error=str(exc), code=exc.code)
        yield

    api = FastAPI(
        title="durq",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    api.state.durq = service
    install_error_handlers(api)
    for module in (jobs, events, queues, breakers, keys, internal, health):
        api.include_router(module.router)
    api.mount("/ui", create_dashboard(service), name="dashboard")
    api.openapi = refined_openapi(api, app, settings)  # type: ignore[method-assign]
    tables: list[RouteTable] = []

    def route_table() -> RouteTable:  # read from the finished document, at first use
        if not tables:
            tables.append(RouteTable(api.openapi()))
        return tables[0]

    api.state.route_table = route_table
    api.add_middleware(StrictQuery, table=route_table)
    # Added last = outermost: the request context wraps the body limit.
    api.add_middleware(BodyLimit, max_bytes=settings.api_max_body_bytes)
    api.add_middleware(
        RequestContext,
        on_finish=service.metrics.observe_request,
        static_paths=frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect"}),
    )
    return api
