"""The API's routers, one module per resource."""

from __future__ import annotations

from typing import Any

from ..schemas import ErrorOut

__all__ = ["error_responses"]

_DESCRIPTIONS = {
    400: "Malformed request: bad JSON, cursor or header (E_BAD_JSON, E_BAD_CURSOR)",
    401: "Missing, unknown or disabled API key (E_UNAUTHENTICATED)",
    403: "Role too low (E_FORBIDDEN), or internal route without its token (E_INTERNAL_ONLY)",
    404: "No such resource, or a job of another owner (E_NOT_FOUND)",
    409: "Conflict (E_IDEMPOTENCY_CONFLICT, E_INVALID_TRANSITION, E_BREAKER_OPEN)",
    410: "The job finished and was pruned (E_GONE)",
    413: "Body over DURQ_API_MAX_BODY_BYTES (E_PAYLOAD_TOO_LARGE)",
    422: "Invalid field: missing, unknown, wrong type or out of range (E_VALIDATION)",
    429: "Rate limited: wait Retry-After seconds (E_RATE_LIMITED)",
    503: "Database unreachable or migrations pending",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorOut, "description": _DESCRIPTIONS[s]} for s in statuses}


#: What any authenticated route may answer besides its success.
AUTHENTICATED = (400, 401, 403, 413, 422, 429, 503)
