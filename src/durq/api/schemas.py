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
)

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
MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600  # ten years; further is a mistake, not a schedule
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
JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]

Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339_string), AfterValidator(_storable)]
JobId = Annotated[StrictInt, Field(ge=1, le=MAX_JOB_ID)]
QueueName = Annotated[Text, Field(pattern=QUEUE_NAME_RE.pattern, examples=["default"])]


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
    task: Annotated[Text, Field(min_length=1, max_length=200, examples=["resize"])]
    args: JsonObject = Field(default_factory=dict, examples=[{"image_id": 7}])
    queue: QueueName | None = None
    priority: Annotated[StrictInt, Field(ge=INT32[0], le=INT32[1])] | None = Field(
        None, description="Lower runs first; default the task's (0 for unknown tasks)"
    )
    run_at: Timestamp | None = Field(None, description="RFC 3339; not with delay_seconds")
    delay_seconds: (
        Annotated[float, Strict(), Field(ge=0, le=MAX_DELAY_SECONDS, allow_inf_nan=False)] | None
    ) = None
    max_attempts: Annotated[StrictInt, Field(ge=1, le=INT32[1])] | None = None
    execution_mode: Literal["async", "sync"] = Field(
        "async",
        description="sync runs the job in this server before answering (200 with its "
        "final state); only for tasks the server's App defines",
    )
    breaker_key: Annotated[Text, Field(min_length=1, max_length=255)] | None = Field(
        None,
        description="Circuit breaker key (e.g. connector:pair): consecutive failures under "
        "it pause it, and a paused key answers 409 E_BREAKER_OPEN",
        examples=["connector-7:pair-42"],
    )
    concurrency_key: Annotated[Text, Field(min_length=1, max_length=255)] | None = Field(
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
    owner: Annotated[Text, Field(min_length=1, max_length=128, examples=["billing"])]
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
