"""The OpenAPI document made exact: every constraint the server enforces, stated.

FastAPI derives most of the document from the request models; what depends on the served
App or on more than one field is added here:

* ``task`` is one of the App's tasks, and ``args`` names that task's parameters (an App
  without tasks serves producers whose code lives elsewhere: any name, any args);
* ``run_at`` and ``delay_seconds`` exclude each other, and ``execution_mode: sync`` takes
  neither (a job that runs now cannot be scheduled);
* ``concurrency_key`` only names a key the App has a limit for (absent when it has none);
* ``role`` is a role of the server's ladder (``DURQ_API_ROLES``);
* a job cursor is exactly what ``next_cursor`` holds.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Callable
from typing import Any

from ..app import App
from ..settings import Settings

__all__ = ["JOB_CURSOR_PATTERN", "KEY_CURSOR_PATTERN", "refine", "refined_openapi"]

_NUL_FREE = "[^\\x00]"


def _job_cursor_pattern() -> str:
    """``base64url("j:" + digits)`` without padding, for 1 to 19 digits, as a regex.

    Base64 turns each 3 bytes into 4 characters, so the encoding of every 3 digits is one
    of 1,000 four-character strings; the first group holds ``j:`` and one digit, and the
    last may hold one or two digits (2 or 3 characters)."""

    def b64(raw: str) -> str:
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    digits = [str(d) for d in range(10)]
    head = "|".join(b64(f"j:{d}") for d in digits)
    block = "|".join(b64(a + b + c) for a in digits for b in digits for c in digits)
    tail = "|".join([b64(a + b) for a in digits for b in digits] + [b64(a) for a in digits])
    # 1 digit in the head, 0-6 blocks of 3, an optional tail of 1-2: at most 19 digits.
    return f"^(?:{head})(?:{block}){{0,6}}(?:{tail})?$"


JOB_CURSOR_PATTERN = _job_cursor_pattern()


def _key_cursor_pattern() -> str:
    """``base64url("k:" + key id)``: a key id is ``key_`` and 16 hex digits. Each base64
    character holds bits of up to two bytes, so each position allows the characters that
    some hex digits put there (a little wider than exact: every match decodes to printable
    ASCII, which the server takes)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    hexes = [ord(c) for c in "0123456789abcdef"]
    sixes = [
        {a >> 2 for a in hexes},
        {((a & 3) << 4) | (b >> 4) for a in hexes for b in hexes},
        {((b & 15) << 2) | (c >> 6) for b in hexes for c in hexes},
        {c & 63 for c in hexes},
    ]
    group = "".join("[" + re.escape("".join(alphabet[v] for v in sorted(s))) + "]" for s in sixes)
    last = "[" + re.escape("".join(alphabet[(a & 3) << 4] for a in hexes)) + "]"
    prefix = base64.urlsafe_b64encode(b"k:key_").decode()  # 6 bytes: 8 characters
    return f"^{prefix}(?:{group}){{5}}{group[: group.index(']') + 1]}{last}$"


KEY_CURSOR_PATTERN = _key_cursor_pattern()


def _args_schema(names: dict[str, bool], open_ended: bool, value: dict[str, Any]) -> Any:
    """A task's ``args``: its parameters by name (``names``: name → required)."""
    return {
        "type": "object",
        "properties": {name: value for name in names},
        "required": sorted(name for name, required in names.items() if required),
        "additionalProperties": value if open_ended else False,
    }


def _glob_regex(pattern: str) -> str:
    parts = [
        f"{_NUL_FREE}*" if ch == "*" else _NUL_FREE if ch == "?" else re.escape(ch)
        for ch in pattern
    ]
    return "".join(parts)


def _modes(job_in: dict[str, Any]) -> list[dict[str, Any]]:
    """``job_in`` as three exclusive shapes: async at a time, async after a delay, sync."""
    null = {"type": "null"}
    shapes = []
    for mode, run_at, delay in (("async", True, False), ("async", False, True), ("sync", 0, 0)):
        shape = copy.deepcopy(job_in)
        props = shape["properties"]
        if not run_at:
            props["run_at"] = null
        if not delay:
            props["delay_seconds"] = null
        props["execution_mode"] = {**props["execution_mode"], "enum": [mode]}
        if mode == "sync":
            shape["required"] = sorted({*shape.get("required", []), "execution_mode"})
        shapes.append(shape)
    return shapes


def refine(document: dict[str, Any], app: App, settings: Settings) -> dict[str, Any]:
    """``document`` (FastAPI's) with the App's and the settings' constraints added."""
    schemas = document.get("components", {}).get("schemas", {})
    cursors = {"/v1/jobs": JOB_CURSOR_PATTERN, "/v1/keys": KEY_CURSOR_PATTERN}
    for path, pattern in cursors.items():
        get = document.get("paths", {}).get(path, {}).get("get", {})
        for param in get.get("parameters", []):
            if param.get("name") == "cursor" and param.get("in") == "query":
                for option in param["schema"].get("anyOf", [param["schema"]]):
                    if option.get("type") == "string":
                        option["pattern"] = pattern
                        option["description"] = "next_cursor of the previous page, unchanged"
    if "KeyIn" in schemas:
        role = schemas["KeyIn"]["properties"]["role"]
        role["enum"] = list(settings.role_ladder)
        role["description"] = "A role of the server's ladder (DURQ_API_ROLES), lowest first"
    job_in = schemas.get("JobIn")
    if job_in is None:
        return document
    props = job_in["properties"]
    if app.limits:
        exact = [key for key in app.limits if not any(c in key for c in "*?")]
        globs = [_glob_regex(key) for key in app.limits if key not in exact]
        keys = [re.escape(key) for key in exact] + globs
        option = next(o for o in props["concurrency_key"]["anyOf"] if o.get("type") == "string")
        option["pattern"] = "^(?:" + "|".join(keys) + ")$"
    else:  # no limits: every concurrency_key is refused, so none is documented
        props.pop("concurrency_key", None)
    shapes = []
    value = props["args"]["additionalProperties"]
    if app.tasks:
        for name, task in sorted(app.tasks.items()):
            shape = copy.deepcopy(job_in)
            shape["properties"]["task"] = {"type": "string", "enum": [name]}
            names, open_ended = task.parameters()
            shape["properties"]["args"] = _args_schema(names, open_ended, value)
            if not any(required for required in names.values()):
                shape["required"] = ["task"]
            else:
                shape["required"] = ["task", "args"]
            shapes.extend(_modes(shape))
    else:
        shapes = _modes(job_in)
    schemas["JobIn"] = {
        "title": "JobIn",
        "description": job_in.get("description", "")
        + " run_at and delay_seconds exclude each other; execution_mode sync takes neither.",
        "anyOf": shapes,
    }
    return document


def refined_openapi(api: Any, app: App, settings: Settings) -> Callable[[], dict[str, Any]]:
    """A replacement for ``api.openapi`` that refines FastAPI's document once."""
    original = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            api.openapi_schema = refine(original(), app, settings)
        return dict(api.openapi_schema)

    return openapi
