"""One error envelope for every failure: ``{"error": {"code", "message", "request_id"}}``.

The codes are stable; clients branch on ``code``, people read ``message``.

=========================  ======  ==========================================================
code                       status  meaning
=========================  ======  ==========================================================
E_BAD_JSON                 400     the body is not valid JSON
E_BAD_CURSOR               400     ``cursor`` is not one this API issued
E_BAD_REQUEST              400     a malformed header (e.g. ``Content-Length``)
E_UNAUTHENTICATED          401     no API key, an unknown key, or a disabled key
E_FORBIDDEN                403     the key's role is too low for this route
E_INTERNAL_ONLY            403     ``/internal/...`` without the right ``X-Internal-Token``
E_NOT_FOUND                404     no such job, key or route (or a job of another owner)
E_METHOD_NOT_ALLOWED       405     the route exists, not with this method
E_IDEMPOTENCY_CONFLICT     409     ``Idempotency-Key`` reused with a different body
E_INVALID_TRANSITION       409     the job's state does not allow this action
E_BREAKER_OPEN             409     the job's breaker key is paused; ``details`` holds its alert
E_GONE                     410     the job finished and was pruned
E_PAYLOAD_TOO_LARGE        413     the body is over ``DURQ_API_MAX_BODY_BYTES``
E_VALIDATION               422     a field is missing, unknown, of the wrong type or out of range
E_UNKNOWN_TASK             422     a task the served App does not define (the closest is named)
E_RATE_LIMITED             429     this key sent too many requests; wait ``Retry-After`` seconds
E_INTERNAL                 500     a bug: the log line with this ``request_id`` has the traceback
E_DATABASE_UNAVAILABLE     503     the database cannot be reached
E_SCHEMA_OUT_OF_DATE       503     migrations are pending: run ``durq migrate``
=========================  ======  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    BreakerOpen,
    DatabaseUnavailable,
    DurqError,
    EventNotFound,
    IdempotencyConflict,
    InvalidTransition,
    JobGone,
    JobNotFound,
    KeyNotFound,
    SchemaOutOfDate,
    UnknownTask,
    ValidationError,
)
from .request_id import current_request_id
from .schemas import PATTERN_HINTS

__all__ = ["ApiError", "error_response", "install_error_handlers"]

log = structlog.get_logger("durq.api")

#: durq's own errors → HTTP status (subclasses first: JobGone is a JobNotFound).
DURQ_STATUS: tuple[tuple[type[DurqError], int], ...] = (
    (JobGone, 410),
    (JobNotFound, 404),
    (EventNotFound, 404),
    (KeyNotFound, 404),
    (BreakerOpen, 409),
    (IdempotencyConflict, 409),
    (InvalidTransition, 409),
    (UnknownTask, 422),
    (ValidationError, 422),
    (DatabaseUnavailable, 503),
    (SchemaOutOfDate, 503),
)


class ApiError(Exception):
    """An error the API answers with as is."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        details: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.details = details


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    details: Sequence[Mapping[str, Any]] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message, "request_id": current_request_id()}
    if details:
        body["details"] = list(details)
    return JSONResponse({"error": body}, status_code=status, headers=dict(headers or {}))


def durq_error_status(exc: DurqError) -> int:
    for kind, status in DURQ_STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def _location(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
        return "body" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts)
    return ".".join(parts)


def describe_validation(errors: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """One readable sentence and a detail list from pydantic's errors."""
    details: list[dict[str, Any]] = []
    sentences: list[str] = []
    for err in errors:
        where = _location(err.get("loc", ()))
        kind = str(err.get("type", ""))
        if kind == "extra_forbidden":
            msg = "unknown field: remove it (see /docs for the fields this route takes)"
        elif kind == "missing":
            msg = "this field is required"
        elif kind == "dict_type":
            msg = 'must be a JSON object, e.g. {"image_id": 7}'
        elif kind == "string_pattern_mismatch" and (
            hint := PATTERN_HINTS.get(str(err.get("ctx", {}).get("pattern", "")))
        ):
            msg = hint
        else:
            msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        sentences.append(f"{where}: {msg}")
        detail: dict[str, Any] = {"loc": where, "type": kind, "message": msg}
        details.append(detail)
    return "; ".join(sentences) or "the request is invalid", details


def install_error_handlers(api: FastAPI) -> None:
    @api.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(
            exc.status, exc.code, exc.message, headers=exc.headers, details=exc.details
        )

    @api.exception_handler(DurqError)
    async def _durq_error(request: Request, exc: DurqError) -> JSONResponse:
        status = durq_error_status(exc)
        if status >= 500 and status != 503:
            log.error("durq_error", code=exc.code, error=str(exc))
        details = None
        if isinstance(exc, BreakerOpen):  # the alert context, so a caller can show why
            details = [
                {
                    "loc": "breaker_key",
                    "type": "breaker_open",
                    "message": str(exc),
                    "key": exc.key,
                    "paused_until": exc.paused_until,
                    "alert": exc.alert,
                }
            ]
        return error_response(status, exc.code, str(exc), details=details)

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            reason = next(
                (str(e.get("ctx", {}).get("error", "")) for e in errors if e.get("ctx")), ""
            )
            hint = f" ({reason})" if reason else ""
            return error_response(
                400,
                "E_BAD_JSON",
                f"the request body is not valid JSON{hint}; send a JSON object with "
                "Content-Type: application/json",
            )
        message, details = describe_validation(errors)
        return error_response(422, "E_VALIDATION", message, details=details)

    @api.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return error_response(
                404,
                "E_NOT_FOUND",
                f"no route {request.url.path}; see /docs for the routes this API has",
            )
        if exc.status_code == 405:
            allow = _allowed_methods(request) or (exc.headers or {}).get("Allow", "")
            if request.method == "OPTIONS":  # what may be done here: the methods, no body
                return Response(status_code=204, headers={"Allow": allow})
            return error_response(
                405,
                "E_METHOD_NOT_ALLOWED",
                f"{request.method} is not allowed on {request.url.path}; it allows {allow} "
                "(see /docs)",
                headers={"Allow": allow},
            )
        if exc.status_code == 400:  # a body the JSON parser gave up on (too deep, huge number)
            return error_response(
                400,
                "E_BAD_JSON",
                "the request body could not be parsed as JSON (nested too deeply, or a number "
                "with too many digits); send a JSON object with Content-Type: "
                "application/json",
            )
        return error_response(exc.status_code, f"E_HTTP_{exc.status_code}", str(exc.detail))


def _allowed_methods(request: Request) -> str:
    table = getattr(request.app.state, "route_table", None)
    if table is None:
        return ""
    path = request.scope["path"][len(request.scope.get("root_path", "")) :] or "/"
    return ", ".join(table().allowed(path))
