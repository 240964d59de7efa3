"""The recipe's errors: each carries the stable code the HTTP layer answers with."""

from __future__ import annotations

__all__ = ["ClosureError", "ConflictError", "ForbiddenError", "NotFoundError"]


class ClosureError(Exception):
    status_code = 400
    code = "E_BAD_REQUEST"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(ClosureError):
    status_code = 404
    code = "E_NOT_FOUND"


class ForbiddenError(ClosureError):
    status_code = 403
    code = "E_FORBIDDEN"


class ConflictError(ClosureError):
    status_code = 409
    code = "E_CONFLICT"
