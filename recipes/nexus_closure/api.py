"""The recipe's HTTP app: routes registered through ``create_api_router`` (d-013) and one
middleware policy for every ``/internal/`` path (d-011)."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from . import internal_libraries, media_routes
from .deps import error_response
from .errors import ClosureError
from .tasks import NexusRuntime

__all__ = ["INTERNAL_HEADER", "InternalHeaderMiddleware", "create_api_router", "create_app"]

INTERNAL_HEADER = "X-Nexus-Internal"
INTERNAL_PREFIX = "/internal/"


def create_api_router() -> APIRouter:
    """Every route of the API, internal ones included; no app-level one-off includes."""
    router = APIRouter()
    router.include_router(media_routes.router)
    router.include_router(internal_libraries.router)
    return router


class InternalHeaderMiddleware:
    """The one internal-auth policy: with ``requires_internal_header`` on, any
    ``/internal/`` request without the right ``X-Nexus-Internal`` secret gets
    ``403 E_INTERNAL_ONLY`` before it reaches a route."""

    def __init__(
        self, app: ASGIApp, *, requires_internal_header: bool, internal_secret: str | None
    ) -> None:
        if requires_internal_header and not internal_secret:
            raise ValueError(
                "requires_internal_header=True needs internal_secret (NEXUS_INTERNAL_SECRET)"
            )
        self.app = app
        self.requires_internal_header = requires_internal_header
        self.secret = (internal_secret or "").encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and self.requires_internal_header
            and scope["path"].startswith(INTERNAL_PREFIX)
            and not self._authorized(scope)
        ):
            response = error_response(
                403,
                "E_INTERNAL_ONLY",
                f"internal route: send the {INTERNAL_HEADER} header with the internal secret",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        wanted = INTERNAL_HEADER.lower().encode()
        sent = next((v for k, v in scope["headers"] if k == wanted), None)
        return sent is not None and hmac.compare_digest(sent, self.secret)


def create_app(
    runtime: NexusRuntime,
    *,
    requires_internal_header: bool = True,
    internal_secret: str | None = None,
) -> FastAPI:
    app = FastAPI(title="Nexus default-library closure (durq recipe)")
    app.state.runtime = runtime
    app.include_router(create_api_router())
    app.add_middleware(
        InternalHeaderMiddleware,
        requires_internal_header=requires_internal_header,
        internal_secret=internal_secret,
    )

    @app.exception_handler(ClosureError)
    async def _closure_error(_request: Request, exc: ClosureError) -> Any:
        return error_response(exc.status_code, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> Any:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(422, "E_VALIDATION", f"{where}: {first.get('msg', 'invalid')}")

    return app
