"""Per-request plumbing as plain ASGI middleware: request ids, access logs, body limits.

``RequestContext`` is the outermost layer: it gives every request an id (the client's
``X-Request-ID`` when it is sane, else a new one), puts it on the response, in every log
line (structlog context variables) and in error bodies, times the request for the HTTP
metrics, and turns an unexpected exception into the 500 envelope.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import error_response
from .request_id import request_id_var

__all__ = ["BodyLimit", "RequestContext"]

log = structlog.get_logger("durq.api")

# Echo a client's id only when it is safe to put in headers and logs.
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:/+=\-]{1,128}$")

UNMATCHED_ROUTE = "unmatched"

OnFinish = Callable[[str, str, int, float], None]


def route_template(scope: Scope, before: Any, static_paths: frozenset[str]) -> str:
    """The matched route's template (``/v1/jobs/{job_id}``), never the raw path.

    FastAPI records API routes in the scope; its own pages (``/openapi.json``, ``/docs``)
    are fixed paths without parameters, named by ``static_paths``.
    """
    route = scope.get("route")
    if route is not None and route is not before:
        template = getattr(route, "path_format", None)
        if template:
            return str(template)
    path = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path if path in static_paths else UNMATCHED_ROUTE


class RequestContext:
    def __init__(
        self, app: ASGIApp, on_finish: OnFinish, static_paths: frozenset[str] = frozenset()
    ) -> None:
        self.app = app
        self.on_finish = on_finish
        self.static_paths = static_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = Headers(scope=scope).get("x-request-id", "")
        request_id = incoming if _REQUEST_ID_RE.match(incoming) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        token = request_id_var.set(request_id)
        log_tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        route_before = scope.get("route")
        status = 500
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled_error", method=scope["method"], path=scope["path"])
            if started:
                raise
            response = error_response(
                500,
                "E_INTERNAL",
                f"unexpected server error; report it with request id {request_id} "
                "(the server log has the traceback under that id)",
            )
            await response(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - t0
            route = route_template(scope, route_before, self.static_paths)
            self.on_finish(scope["method"], route, status, elapsed)
            log.info(
                "http_request",
                method=scope["method"],
                path=scope["path"],
                route=route,
                status=status,
                duration_ms=round(elapsed * 1000, 2),
                key_id=state.get("key_id"),
            )
            structlog.contextvars.reset_contextvars(**log_tokens)
            request_id_var.reset(token)


class BodyLimit:
    """Refuse bodies over ``max_bytes`` with 413 before any route reads them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await self._reject(
                    scope,
                    receive,
                    send,
                    400,
                    "E_BAD_REQUEST",
                    "Content-Length must be a whole number of bytes",
                )
                return
            if int(declared) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
        # Read the body now (it is small by definition), counting chunked uploads too.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._reject(
            scope,
            receive,
            send,
            413,
            "E_PAYLOAD_TOO_LARGE",
            f"the request body is over {self.max_bytes} bytes; send less (put large inputs "
            "in storage and pass a reference), or raise DURQ_API_MAX_BODY_BYTES",
        )

    async def _reject(
        self, scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
    ) -> None:
        await error_response(status, code, message)(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    queue = list(messages)

    async def replay() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replay
