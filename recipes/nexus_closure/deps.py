"""What routes share: the runtime, the caller's identity, and the envelopes."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from .errors import ClosureError
from .tasks import NexusRuntime

__all__ = ["error_response", "get_runtime", "success_response", "viewer_id"]


def get_runtime(request: Request) -> NexusRuntime:
    runtime: NexusRuntime = request.app.state.runtime
    return runtime


def success_response(data: BaseModel) -> dict[str, Any]:
    """The success envelope: ``{"data": {...}}``."""
    return {"data": data.model_dump(mode="json")}


def error_response(status_code: int, code: str, message: str) -> JSONResponse:
    """The error envelope: ``{"error": {"code", "message"}}``."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status_code)


class Unauthenticated(ClosureError):
    status_code = 401
    code = "E_UNAUTHENTICATED"


def viewer_id(x_nexus_user_id: Annotated[str | None, Header()] = None) -> uuid.UUID:
    """The viewer, as the trusted front end names them (sessions are pr-01's, out of scope)."""
    try:
        return uuid.UUID(x_nexus_user_id or "")
    except ValueError:
        raise Unauthenticated("send X-Nexus-User-Id with the viewer's user id") from None
