"""The id of the request being served, for logs and error envelopes."""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["current_request_id", "request_id_var"]

request_id_var: ContextVar[str | None] = ContextVar("durq_request_id", default=None)


def current_request_id() -> str | None:
    return request_id_var.get()
