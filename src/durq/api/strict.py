"""What the OpenAPI document promises about requests, held to by the server: the methods
each path allows (``Allow`` on 405 and on OPTIONS), and query parameters given once.

The route table is read from the API's own OpenAPI document, so the two cannot drift:
a path's ``Allow`` lists exactly its documented methods, and only parameters documented
as arrays (``state`` of ``GET /v1/jobs``) may repeat.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import error_response

__all__ = ["RouteTable", "StrictQuery"]


@dataclass(frozen=True, slots=True)
class _Path:
    pattern: re.Pattern[str]
    #: method → the query parameters documented as arrays (the only ones that may repeat)
    methods: Mapping[str, frozenset[str]]


class RouteTable:
    def __init__(self, openapi: Mapping[str, Any]) -> None:
        self._paths: list[_Path] = []
        for template, operations in openapi.get("paths", {}).items():
            regex = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
            methods = {
                method.upper(): frozenset(
                    p["name"]
                    for p in op.get("parameters", [])
                    if p.get("in") == "query" and _is_array(p.get("schema", {}))
                )
                for method, op in operations.items()
            }
            self._paths.append(_Path(re.compile(f"^{regex}$"), methods))

    def _match(self, path: str) -> _Path | None:
        return next((p for p in self._paths if p.pattern.match(path)), None)

    def allowed(self, path: str) -> list[str]:
        """The methods ``path`` answers: its documented ones, HEAD with GET, and OPTIONS."""
        found = self._match(path)
        if found is None:
            return []
        methods = set(found.methods)
        if "GET" in methods:
            methods.add("HEAD")
        return sorted(methods | {"OPTIONS"})

    def repeatable(self, method: str, path: str) -> frozenset[str] | None:
        """The query parameters that may repeat, or None for an undocumented operation."""
        found = self._match(path)
        if found is None:
            return None
        return found.methods.get("GET" if method == "HEAD" else method)


def _is_array(schema: Mapping[str, Any]) -> bool:
    if schema.get("type") == "array":
        return True
    return any(_is_array(s) for s in schema.get("anyOf", []))


class StrictQuery:
    """422 for a query parameter given more than once where the document says it is a
    single value (``?limit=1&limit=2`` is ambiguous: refused, never resolved silently)."""

    def __init__(self, app: ASGIApp, table: Callable[[], RouteTable]) -> None:
        self.app = app
        self.table = table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("query_string"):
            query = scope["query_string"].decode("latin-1")
            names = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                path = scope["path"][len(scope.get("root_path", "")) :] or "/"
                may_repeat = self.table().repeatable(scope["method"], path)
                # An operation the document does not describe (a mounted page) sets its own rules.
                refused = [] if may_repeat is None else [n for n in repeated if n not in may_repeat]
                if refused:
                    await error_response(
                        422,
                        "E_VALIDATION",
                        f"query parameter {refused[0]!r} is given more than once; give it "
                        "once (only parameters documented as arrays, like state, repeat)",
                        details=[
                            {"loc": f"query.{n}", "type": "repeated", "message": "given twice"}
                            for n in refused
                        ],
                    )(scope, receive, send)
                    return
        await self.app(scope, receive, send)
