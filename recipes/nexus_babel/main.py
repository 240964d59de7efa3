"""``create_app()``: the FastAPI application with its services on ``app.state`` (FR-035…038)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
from fastapi import FastAPI, Request, Response
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .api import router
from .config import Settings, get_settings
from .observability import configure_logging
from .platform import Platform, worker_identity
from .ratelimit import RateLimiter
from .sync_runner import SyncRunner

__all__ = ["create_app"]

log = structlog.get_logger("nexus_babel.http")

#: A caller's X-Request-ID is kept if it is this short and plain; else a new one is made,
#: since it is copied into logs, spans and the jobs the request submits.
REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")


def create_app(
    settings_override: Settings | None = None, *, tracer_provider: TracerProvider | None = None
) -> FastAPI:
    """The platform's API; spans go to ``tracer_provider``, else OpenTelemetry's global one."""
    settings = settings_override or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings)
        platform = Platform.build(settings, tracer_provider=tracer_provider)
        platform.start()
        for name, value in vars(platform).items():
            setattr(app.state, name, value)
        app.state.platform = platform
        app.state.rate_limiter = RateLimiter(
            settings.rate_limit_per_second, settings.rate_limit_burst
        )
        app.state.sync_runner = SyncRunner(
            platform.queue_app,
            max_concurrency=settings.sync_max_concurrency,
            timeout=settings.sync_timeout_seconds,
            worker_id=worker_identity("api-sync"),
        )
        try:
            yield
        finally:
            app.state.sync_runner.close()
            platform.close()

    app = FastAPI(title=settings.app_name, lifespan=lifespan)
    app.include_router(router)

    @app.middleware("http")
    async def track_request(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        given = request.headers.get("X-Request-ID", "")
        request_id = given if REQUEST_ID.fullmatch(given) else str(uuid.uuid4())
        request.state.request_id = request_id
        started = time.perf_counter()
        tracer = request.app.state.tracer
        # a caller's W3C traceparent makes this request's span a child of the caller's
        with (
            structlog.contextvars.bound_contextvars(request_id=request_id),
            tracer.start_as_current_span(
                f"{request.method} {request.url.path}",
                context=extract(request.headers),
                kind=SpanKind.SERVER,
                attributes={"http.request.method": request.method, "nexus.request_id": request_id},
            ) as span,
        ):
            response = await call_next(request)
            elapsed = time.perf_counter() - started
            route = request.scope.get("route")
            path = getattr(route, "path", "unmatched")
            span.update_name(f"{request.method} {path}")
            span.set_attributes(
                {"http.route": path, "http.response.status_code": response.status_code}
            )
            if response.status_code >= 500:
                span.set_status(Status(StatusCode.ERROR))
            owner = getattr(request.state, "owner", None)
            if owner is not None:
                span.set_attribute("nexus.api_key.owner", owner)
            metrics = request.app.state.metrics
            metrics.observe("http.request.ms", elapsed * 1000)
            metrics.inc(f"http.status.{response.status_code}")
            prom = request.app.state.prometheus
            prom.requests.labels(request.method, path, str(response.status_code)).inc()
            prom.duration.labels(request.method, path).observe(elapsed)
            # never the API key: only who it belongs to, once authenticated
            log.info(
                "request",
                method=request.method,
                path=path,
                status=response.status_code,
                duration_ms=round(elapsed * 1000, 2),
                owner=owner,
            )
        response.headers["X-Request-ID"] = request_id
        return response

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    def metrics_snapshot(request: Request) -> dict[str, Any]:
        snapshot: dict[str, Any] = request.app.state.metrics.snapshot()
        return snapshot

    @app.get("/metrics/prometheus")
    def metrics_prometheus(request: Request) -> Response:
        body = generate_latest(request.app.state.prometheus.registry)
        return Response(content=body, media_type=CONTENT_TYPE_LATEST)

    return app
