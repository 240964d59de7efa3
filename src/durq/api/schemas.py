"""Request and response bodies. Requests are strict: unknown fields and wrong types are
refused with 422 naming the field, never coerced ("5" is not a number)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)

from .._engine.validate import MAX_DELAY_SECONDS
from ..types import QUEUE_NAME_RE
from ..wire import (
    ArtifactOut,
    AttemptOut,
    JobOut,
    KeyOut,
    QueueOut,
    RequeueOut,
    WorkerOut,
)

__all__ = [
    "ArtifactOut",
    "AttemptOut",
    "Data",
    "ErrorOut",
    "InternalRequeueIn",
    "JobIn",
    "JobOut",
    "KeyCreatedOut",
    "KeyIn",
    "KeyOut",
    "Page",
    "QueueOut",
    "QueueStateOut",
    "RequeueOut",
    "WhoAmIOut",
    "WorkerOut",
]

T = TypeVar("T")

MAX_JOB_ID = 2**63 - 1
INT32 = (-(2**31), 2**31 - 1)


def _rfc3339_string(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("must be an RFC 3339 string with a time zone, e.g. 2030-01-01T12:00:00Z")
    return value


def _storable(value: datetime) -> datetime:
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not 1970 <= utc.year <= 9998:
        raise ValueError("must be between 1970 and 9998 (UTC)")
    return utc


def _storable_string(value: str, what: str = "text") -> str:
    if "\x00" in value:
        raise ValueError(
            f"{what} must not contain NUL characters (\\u0000): PostgreSQL cannot store them"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid Unicode (it has an unpaired surrogate)") from None
    return value


def _storable_text(value: str) -> str:
    return _storable_string(value)


def _storable_json(value: Any) -> Any:
    """Every string of a JSON value, keys included, must be storable text."""
    if isinstance(value, str):
        _storable_string(value, "strings in args")
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable_string(key, "keys in args")
            _storable_json(item)
    elif isinstance(value, list):
        for item in value:
            _storable_json(item)
    return value


#: A string durq can store on either backend (no NUL, no lone surrogates).
Text = Annotated[StrictStr, AfterValidator(_storable_text)]

# What the server checks, as regular expressions the document states (and pydantic holds
# to): a character that is not whitespace by Python's str.strip() nor NUL, a name without
# surrounding whitespace, a value that is not blank.
_SOLID = r"[^\s\x00\x1c-\x1f\x85]"
TRIMMED = rf"^{_SOLID}(?:[^\x00]*{_SOLID})?$"
NON_BLANK = rf"^[^\x00]*{_SOLID}[^\x00]*$"
NUL_FREE = r"^[^\x00]*$"

#: What each pattern means, for error messages (pydantic would print the regex).
PATTERN_HINTS = {
    NUL_FREE: "must not contain NUL characters (\\u0000): PostgreSQL cannot store them",
    TRIMMED: "must be non-empty text without surrounding whitespace or NUL characters",
    NON_BLANK: "must not be blank, nor contain NUL characters",
    QUEUE_NAME_RE.pattern: "must be a queue name: 1-64 characters, letters, digits and "
    "_ . : - (starting with a letter or digit), e.g. 'default'",
}


# Constraints go before the validator: pydantic leaves constraints applied after a
# validator out of the schema.
TaskName = Annotated[
    StrictStr,
    Field(min_length=1, max_length=200, pattern=TRIMMED, examples=["resize"]),
    AfterValidator(_storable_text),
]
OwnerName = Annotated[
    StrictStr,
    Field(min_length=1, max_length=128, pattern=TRIMMED, examples=["billing"]),
    AfterValidator(_storable_text),
]
KeyName = Annotated[
    StrictStr,
    Field(min_length=1, max_length=255, pattern=NON_BLANK),
    AfterValidator(_storable_text),
]


#: A JSON value as the document promises it: scalars, or one level of list or object
#: (the server takes deeper values, up to DURQ_MAX_JSON_DEPTH).
_SCALAR: dict[str, Any] = {
    "anyOf": [
        {"type": "null"},
        {"type": "boolean"},
        {"type": "integer", "minimum": -(2**53), "maximum": 2**53},
        {"type": "number"},
        {"type": "string", "pattern": "^[^\\x00]*$"},
    ]
}
_VALUE: dict[str, Any] = {
    "anyOf": [
        *_SCALAR["anyOf"],
        {"type": "array", "items": _SCALAR},
        {
            "type": "object",
            "additionalProperties": _SCALAR,
            "propertyNames": {"pattern": "^[^\\x00]*$"},
        },
    ]
}
JsonObject = Annotated[
    dict[str, Any],
    AfterValidator(_storable_json),
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": _VALUE,
            "propertyNames": {"pattern": "^[^\\x00]*$"},
            "description": "Strings hold no NUL; at most DURQ_MAX_JSON_DEPTH levels deep and "
            "DURQ_MAX_ARGS_BYTES of JSON",
        }
    ),
]

#: RFC 3339 with a zone, in years the database stores (the UTC instant in 1970-9998; the
#: document promises 1971-9997 so that no offset takes a valid value out of range, and days
#: up to 28 so that every match is a real date; the server takes every real date).
TIMESTAMP_PATTERN = (
    r"^(?:19[7-9][1-9]|19[89]0|[2-8]\d{3}|9[0-8]\d{2}|99[0-8]\d|999[0-7])"
    r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$"
)
Timestamp = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339_string),
    AfterValidator(_storable),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": TIMESTAMP_PATTERN}),
]


def _integral(value: Any) -> Any:
    """JSON has one number type: 7.0 is the integer 7 (as JSON Schema says); 7.5 and "7"
    are still refused."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


#: An integer as JSON means it: 7 or 7.0, never "7" or true (the constraints go first, or
#: the document would leave them out).
#: In a JSON body, job ids stop at 2**53 - 1 (I-JSON, RFC 7493): the largest integer every
#: JSON parser holds exactly, so a client whose numbers are doubles means the id it sends
#: (real ids never come near it).
MAX_JSON_JOB_ID = 2**53 - 1
JobId = Annotated[StrictInt, Field(ge=1, le=MAX_JSON_JOB_ID), BeforeValidator(_integral)]
Priority = Annotated[StrictInt, Field(ge=INT32[0], le=INT32[1]), BeforeValidator(_integral)]
MaxAttempts = Annotated[StrictInt, Field(ge=1, le=INT32[1]), BeforeValidator(_integral)]
QueueName = Annotated[StrictStr, Field(pattern=QUEUE_NAME_RE.pattern, examples=["default"])]


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Data(BaseModel, Generic[T]):
    """Every success: ``{"data": ...}``."""

    data: T


class Page(BaseModel, Generic[T]):
    """A page of a list, newest first; pass ``next_cursor`` back as ``cursor`` for the next."""

    data: list[T]
    next_cursor: str | None = Field(
        description="Opaque; null on the last page. Stable while new items are added."
    )


class ErrorBody(BaseModel):
    code: str = Field(examples=["E_NOT_FOUND"])
    message: str
    request_id: str | None
    details: list[dict[str, Any]] | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


# ---- jobs ------------------------------------------------------------------------------


class JobIn(StrictBody):
    task: TaskName
    args: JsonObject = Field(default_factory=dict, examples=[{"image_id": 7}])
    queue: QueueName | None = None
    priority: Priority | None = Field(
        None, description="Lower runs first; default the task's (0 for unknown tasks)"
    )
    run_at: Timestamp | None = Field(None, description="RFC 3339; not with delay_seconds")
    delay_seconds: (
        Annotated[float, Strict(), Field(ge=0, le=MAX_DELAY_SECONDS, allow_inf_nan=False)] | None
    ) = None
    max_attempts: MaxAttempts | None = None
    execution_mode: Literal["async", "sync"] = Field(
        "async",
        description="sync runs the job in this server before answering (200 with its "
        "final state); only for tasks the server's App defines",
    )
    breaker_key: KeyName | None = Field(
        None,
        description="Circuit breaker key (e.g. connector:pair): consecutive failures under "
        "it pause it, and a paused key answers 409 E_BREAKER_OPEN",
        examples=["connector-7:pair-42"],
    )
    concurrency_key: KeyName | None = Field(
        None,
        description="Per-key limit key: the server App's limits for it (running at once, "
        "starts per window) hold across all workers",
        examples=["tenant-42"],
    )


class InternalRequeueIn(StrictBody):
    job_id: JobId


# ---- queues and workers ---------------------------------------------------------------


class QueueStateOut(BaseModel):
    name: str
    paused: bool


# ---- keys and identity ----------------------------------------------------------------


class KeyIn(StrictBody):
    owner: OwnerName
    role: Annotated[Text, Field(min_length=1, max_length=64, examples=["producer"])]


class KeyCreatedOut(KeyOut):
    key: str = Field(description="The secret. Shown this once; durq stores only its hash.")


class WhoAmIOut(BaseModel):
    key_id: str
    owner: str
    role: str
    roles: list[str] = Field(description="The role ladder, lowest first")
    powers: list[str]
    tenant: str | None = Field(description="The owner whose jobs alone this key sees, or null")


class StatusOut(BaseModel):
    status: str
    database: str | None = None
    migrations: str | None = None
