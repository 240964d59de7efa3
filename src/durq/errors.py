"""The error tree. Every message says what was wrong and how to fix it.

::

    DurqError
    ├── ConfigurationError          bad settings, URL, or task definition
    ├── DatabaseUnavailable         cannot connect (URL shown with the password hidden)
    ├── SchemaOutOfDate             migrations not applied
    ├── ValidationError             bad input to enqueue/list/...; nothing was written
    ├── UnknownTask                 a task name no App registered
    ├── JobNotFound                 no job with that id
    │   └── JobGone                 the job existed but was pruned
    ├── IdempotencyConflict         same key, different request
    ├── InvalidTransition           a state change the TRANSITIONS table forbids
    ├── InvalidStage                a stage change out of the task's declared order
    ├── LeaseLost                   a fenced write matched no row: another owner has the job
    ├── EventNotFound               no outbox event with that id
    └── SecretUnavailable           a job's secrets cannot be opened (tampered, wrong job,
                                    retired or unknown key-encryption key)

Control-flow signals raised *by tasks* live in :mod:`durq.retry` (``Retry``, ``Fail``,
``Snooze``); they are not errors of durq itself.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BreakerOpen",
    "ConfigurationError",
    "DatabaseUnavailable",
    "DurqError",
    "EventNotFound",
    "IdempotencyConflict",
    "InvalidStage",
    "InvalidTransition",
    "JobGone",
    "JobNotFound",
    "KeyNotFound",
    "LeaseLost",
    "SchemaOutOfDate",
    "SecretUnavailable",
    "UnknownTask",
    "ValidationError",
]


class DurqError(Exception):
    """Base of every error durq raises. ``code`` is stable and used by the HTTP API."""

    code = "E_DURQ"


class ConfigurationError(DurqError):
    code = "E_CONFIG"


class DatabaseUnavailable(DurqError):
    code = "E_DATABASE_UNAVAILABLE"


class SchemaOutOfDate(DurqError):
    code = "E_SCHEMA_OUT_OF_DATE"


class ValidationError(DurqError, ValueError):
    code = "E_VALIDATION"


class UnknownTask(ValidationError, LookupError):
    """An enqueue named a task the App does not define (a typo, or another code base)."""

    code = "E_UNKNOWN_TASK"


class JobNotFound(DurqError, LookupError):
    code = "E_NOT_FOUND"

    def __init__(self, job_id: int, message: str | None = None) -> None:
        self.job_id = job_id
        super().__init__(message or f"job {job_id} does not exist; check the id (durq jobs list)")


class JobGone(JobNotFound):
    code = "E_GONE"

    def __init__(self, job_id: int, created_by: str | None = None) -> None:
        #: The pruned job's owner, so a tenant-scoped reader can tell it from others'.
        self.created_by = created_by
        super().__init__(
            job_id,
            f"job {job_id} finished and was pruned after its retention period; "
            "raise DURQ_PRUNE_* retention to keep finished jobs longer",
        )


class IdempotencyConflict(DurqError):
    code = "E_IDEMPOTENCY_CONFLICT"

    def __init__(self, scope: str, key: str, existing_job_id: int) -> None:
        self.scope = scope
        self.key = key
        self.existing_job_id = existing_job_id
        super().__init__(
            f"idempotency key {key!r} (scope {scope!r}) was already used for job "
            f"{existing_job_id} with different arguments; use a new key for a new request, "
            "or send exactly the original request to get the original job back"
        )


class InvalidTransition(DurqError):
    code = "E_INVALID_TRANSITION"

    def __init__(self, job_id: int | None, from_state: str, to_state: str) -> None:
        self.job_id = job_id
        self.from_state = from_state
        self.to_state = to_state
        who = f"job {job_id}" if job_id is not None else "job"
        super().__init__(
            f"{who} cannot go from {from_state!r} to {to_state!r}: that transition is not in "
            "durq.states.TRANSITIONS (see docs/states.md for the allowed ones)"
        )


class InvalidStage(DurqError):
    code = "E_INVALID_STAGE"


class LeaseLost(DurqError):
    """The worker no longer owns the job: its lease expired and it was reclaimed,
    or it was cancelled. The worker must abandon the job without touching it."""

    code = "E_LEASE_LOST"

    def __init__(self, job_id: int, claim_version: int) -> None:
        self.job_id = job_id
        self.claim_version = claim_version
        super().__init__(
            f"lease lost on job {job_id} (claim_version {claim_version}): another owner "
            "holds it now or it is no longer running; abandon it. If this happens often, "
            "raise lease_seconds or heartbeat more often"
        )


class EventNotFound(DurqError, LookupError):
    code = "E_EVENT_NOT_FOUND"

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        super().__init__(f"no outbox event {event_id!r}; list them with `durq events list`")


class SecretUnavailable(DurqError):
    """A job's sealed secrets cannot be opened. The message never holds key material."""

    code = "E_SECRET_UNAVAILABLE"


class BreakerOpen(DurqError):
    """A job names a breaker key that is open (paused after repeated failures)."""

    code = "E_BREAKER_OPEN"

    def __init__(
        self, key: str, paused_until: str | None, alert: dict[str, Any] | None = None
    ) -> None:
        self.key = key
        self.paused_until = paused_until
        self.alert = alert
        super().__init__(
            f"circuit breaker {key!r} is open after repeated failures"
            + (f" (paused until {paused_until})" if paused_until else "")
            + "; retry after the pause, or fix the dependency and reset it "
            f"(durq breakers reset {key!r})"
        )


class KeyNotFound(DurqError, LookupError):
    """No breaker (or alert) by that key or id."""

    code = "E_NOT_FOUND"
