"""Validation of enqueue requests: pure, shared by the sync and async surfaces and the API.

Everything is checked before anything is written, and each error says how to fix it.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from .._drivers import NewJob
from ..errors import ValidationError
from ..keys import DEFAULT_BREAKER, BreakerRule, Limit, validate_key
from ..retry import RetryPolicy
from ..types import QUEUE_NAME_RE, JobState

__all__ = [
    "DEFAULT_MAX_ARGS_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "MAX_ATTEMPTS",
    "MAX_DELAY_SECONDS",
    "build_new_job",
    "canonical_json",
    "check_json_shape",
    "parse_states",
    "request_hash",
    "validate_task_name",
]

MAX_KEY_LENGTH = 255
#: The defaults of DURQ_MAX_ARGS_BYTES and DURQ_MAX_JSON_DEPTH (the HTTP body cap is 1 MiB).
DEFAULT_MAX_ARGS_BYTES = 1_048_576
DEFAULT_MAX_JSON_DEPTH = 32
MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600  # ten years; further is a mistake, not a schedule
MAX_ATTEMPTS = 2**31 - 1  # the database column is a 32-bit integer
# One encoder each, made once: json.dumps with options builds a new encoder per call, which
# is most of the cost of validating a small job.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
_COMPACT = json.JSONEncoder()
#: Encoded retry policies: a batch of one task's jobs encodes its policy once.
_POLICY_JSON: dict[RetryPolicy, str] = {}


def policy_json(retry: RetryPolicy) -> str:
    try:
        return _POLICY_JSON[retry]
    except KeyError:
        encoded = _COMPACT.encode(retry.to_dict())
        if len(_POLICY_JSON) < 1024:  # policies are few; never grow without bound
            _POLICY_JSON[retry] = encoded
        return encoded
    except TypeError:  # an unhashable custom policy
        return _COMPACT.encode(retry.to_dict())


PRIORITY_RANGE = (-(2**31), 2**31 - 1)


def canonical_json(value: Any, *, what: str) -> str:
    """JSON with sorted keys; a clear error naming the first value that is not JSON."""
    try:
        text = _CANONICAL.encode(value)
    except (TypeError, ValueError) as exc:
        path, bad = _first_non_json(value, "")
        where = f" at {what}{path}" if path else ""
        kind = type(bad).__name__ if bad is not None else "value"
        raise ValidationError(
            f"{what} must be JSON-serialisable, but found a {kind}{where} ({exc}). "
            "Pass plain JSON types (str, int, float, bool, None, list, dict with str keys); "
            "convert others first, e.g. a datetime with .isoformat()"
        ) from None
    # PostgreSQL's jsonb cannot hold NUL or unpaired surrogates; refuse them on both
    # backends so a job means the same everywhere. The substring test keeps this cheap.
    if ("\\u0000" in text or "\\ud" in text) and (bad_path := _unstorable_text(value, "")):
        raise ValidationError(
            f"{what} contains text that cannot be stored at {what}{bad_path}: a NUL character "
            "or an unpaired UTF-16 surrogate. Remove it, or encode binary data (e.g. base64)"
        )
    return text


def check_json_shape(value: Any, *, what: str, max_depth: int) -> None:
    """Refuse what JSON would silently change or what nests deeper than ``max_depth``:
    a dict key that is not a string (``{1: "a"}`` would come back as ``{"1": "a"}``)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            continue
        if depth > max_depth:
            where = path if len(path) <= 60 else path[:60] + "..."
            raise ValidationError(
                f"{what} nests deeper than {max_depth} levels (at {what}{where}); flatten it, "
                "or raise DURQ_MAX_JSON_DEPTH"
            )
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ValidationError(
                        f"{what} has a key of type {type(key).__name__}, {key!r}, at "
                        f"{what}{path}; JSON keys are strings, so it would come back as a "
                        "different value: "
                        f"use str keys (e.g. {str(key)!r})"
                    )
                stack.append((child, f"{path}[{key!r}]", depth + 1))
        else:
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


def _unstorable_text(value: Any, path: str) -> str:
    if isinstance(value, str):
        bad = "\x00" in value or any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
        return (path or "(top level)") if bad else ""
    if isinstance(value, dict):
        for key, item in value.items():
            found = _unstorable_text(key, f"{path}[{key!r}] (key)") or _unstorable_text(
                item, f"{path}[{key!r}]"
            )
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _unstorable_text(item, f"{path}[{i}]")
            if found:
                return found
    return ""


def _first_non_json(value: Any, path: str) -> tuple[str, Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}[{key!r}] (a non-string key)", key
            found = _first_non_json(item, f"{path}[{key!r}]")
            if found[0]:
                return found
        return "", None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _first_non_json(item, f"{path}[{i}]")
            if found[0]:
                return found
        return "", None
    if value is None or isinstance(value, str | bool | int):
        return "", None
    if isinstance(value, float):
        return ("", None) if math.isfinite(value) else (path or "(top level)", value)
    return path or "(top level)", value


def request_hash(task: str, args_json: str) -> str:
    return hashlib.sha256(f"{task}\n{args_json}".encode()).hexdigest()


def validate_queue(queue: str) -> str:
    if not isinstance(queue, str) or not QUEUE_NAME_RE.match(queue):
        raise ValidationError(
            f"invalid queue name {queue!r}: use 1-64 characters, letters, digits and _ . : - "
            "(starting with a letter or digit), e.g. 'default' or 'emails.high'"
        )
    return queue


def validate_task_name(task: str) -> str:
    if not isinstance(task, str) or not task or len(task) > 200 or task != task.strip():
        raise ValidationError(
            f"invalid task name {task!r}: a task name is a non-empty string of at most 200 "
            "characters without surrounding spaces, e.g. 'resize' or 'billing.charge'"
        )
    return task


def checked_args_json(args: Any, max_args_bytes: int, max_json_depth: int) -> str:
    """A job's arguments as canonical JSON, refused if they are not a JSON object, nest
    too deep or are too large."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ValidationError(
            f"args must be a JSON object (a dict of argument name to value), got "
            f"{type(args).__name__}; e.g. {{'image_id': 7}}"
        )
    check_json_shape(args, what="args", max_depth=max_json_depth)
    args_json = canonical_json(args, what="args")
    if len(args_json) > max_args_bytes:  # ASCII: as many bytes as characters
        raise ValidationError(
            f"args are {len(args_json)} bytes of JSON, over the limit of {max_args_bytes} "
            "(DURQ_MAX_ARGS_BYTES); put large inputs in storage and pass a reference, or "
            "raise the limit"
        )
    return args_json


def build_new_job(
    *,
    task: str,
    args: Any,
    queue: str,
    priority: int,
    run_at: datetime | None,
    delay: float | None,
    max_attempts: int,
    retry: RetryPolicy,
    created_by: str | None,
    idempotency_key: str | None,
    idempotency_scope: str | None,
    idempotency_ttl: float,
    max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    request_hash_override: str | None = None,
    breaker_key: str | None = None,
    breaker_rule: BreakerRule = DEFAULT_BREAKER,
    concurrency_key: str | None = None,
    limit: Limit | None = None,
) -> NewJob:
    validate_task_name(task)
    validate_key(breaker_key, "breaker_key")
    validate_key(concurrency_key, "concurrency_key")
    if concurrency_key is not None and limit is None:
        raise ValidationError(
            f"concurrency_key {concurrency_key!r} has no limit configured; set one with "
            f"app.limits[{concurrency_key!r}] = durq.Limit(concurrency=N) (a pattern such as "
            "'tenant-*' also matches), or leave concurrency_key out"
        )
    args_json = checked_args_json(args, max_args_bytes, max_json_depth)
    validate_queue(queue)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError(f"priority must be an integer (lower runs first), got {priority!r}")
    if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
        raise ValidationError(f"priority {priority} is out of range {PRIORITY_RANGE}")
    if run_at is not None and delay is not None:
        raise ValidationError("give either run_at or delay, not both")
    if run_at is not None and (not isinstance(run_at, datetime) or run_at.tzinfo is None):
        raise ValidationError(
            f"run_at must be a timezone-aware datetime, got {run_at!r}; "
            "e.g. datetime.now(UTC) + timedelta(minutes=5)"
        )
    if run_at is not None and not 1970 <= run_at.astimezone(UTC).year <= 9998:
        raise ValidationError(f"run_at must be between 1970 and 9998 (UTC), got {run_at!r}")
    if delay is not None and (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not math.isfinite(delay)
        or delay < 0
    ):
        raise ValidationError(
            f"delay must be a number of seconds >= 0, got {delay!r}; to run now, omit it"
        )
    if delay is not None and delay > MAX_DELAY_SECONDS:
        raise ValidationError(
            f"delay must be at most {MAX_DELAY_SECONDS} seconds (ten years), got {delay!r}; "
            "for a far date give run_at"
        )
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS
    ):
        raise ValidationError(
            f"max_attempts must be an integer >= 1 (1 means no retries) and at most "
            f"{MAX_ATTEMPTS}, got {max_attempts!r}"
        )
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not idempotency_key.strip()
        or len(idempotency_key) > MAX_KEY_LENGTH
    ):
        raise ValidationError(
            f"idempotency_key must be a non-empty string of at most {MAX_KEY_LENGTH} "
            f"characters, got {idempotency_key!r}"
        )
    if not (isinstance(idempotency_ttl, int | float) and idempotency_ttl > 0):
        raise ValidationError(f"idempotency_ttl must be > 0 seconds, got {idempotency_ttl!r}")
    return NewJob(
        queue=queue,
        task=task,
        args_json=args_json,
        priority=priority,
        run_at=run_at,
        delay=float(delay or 0.0),
        max_attempts=max_attempts,
        retry_policy_json=policy_json(retry),
        created_by=created_by,
        idempotency_scope=idempotency_scope,
        idempotency_key=idempotency_key,
        # Only an idempotency key is ever compared with the hash: skip it for keyless jobs.
        request_hash=request_hash_override
        or (request_hash(task, args_json) if idempotency_key is not None else ""),
        idempotency_ttl=float(idempotency_ttl),
        breaker_key=breaker_key,
        breaker_threshold=breaker_rule.threshold,
        breaker_pause=float(breaker_rule.pause),
        concurrency_key=concurrency_key,
        limit=limit if concurrency_key is not None else None,
    )


def parse_states(values: str | JobState | list[str] | list[JobState] | None) -> list[str] | None:
    if values is None:
        return None
    items = [values] if isinstance(values, str | JobState) else list(values)
    out = []
    for item in items:
        try:
            out.append(str(JobState(item)))
        except ValueError:
            known = ", ".join(s.value for s in JobState)
            raise ValidationError(f"unknown state {item!r}; use one of: {known}") from None
    return out
