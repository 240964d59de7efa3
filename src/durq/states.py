"""The job state machine as data.

``TRANSITIONS`` is the only list of allowed state changes; ``docs/states.md`` draws it and a
test keeps the drawing and this table equal. The functions below are the only constructors
of :class:`Change`, and :func:`outcome_to_change` is the one place where what happened to an
attempt becomes the job's next state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from .errors import InvalidTransition
from .retry import Fail, Retry, RetryPolicy, Snooze, TaskSignal, clamp_delay
from .types import JobState

__all__ = [
    "CRASHED",
    "TRANSITIONS",
    "Change",
    "Crashed",
    "Lost",
    "Outcome",
    "Success",
    "cancel",
    "check_transition",
    "claim",
    "outcome_to_change",
    "release",
    "requeue",
]

Q, R, W = JobState.QUEUED, JobState.RUNNING, JobState.RETRY_WAIT
S, D, C = JobState.SUCCEEDED, JobState.DEAD_LETTER, JobState.CANCELLED

#: The error code and attempt outcome of an attempt whose process died.
CRASHED = "crashed"

#: (from, to) -> the actions that make that change. Nothing else is allowed.
TRANSITIONS: dict[tuple[JobState, JobState], frozenset[str]] = {
    (Q, R): frozenset({"claim"}),
    (W, R): frozenset({"claim"}),
    (R, S): frozenset({"complete"}),
    (R, W): frozenset({"retry", "reclaim"}),
    (R, D): frozenset({"dead_letter", "reclaim"}),
    (R, Q): frozenset({"snooze", "release"}),
    (R, C): frozenset({"cancel"}),
    (Q, C): frozenset({"cancel"}),
    (W, C): frozenset({"cancel"}),
    (Q, Q): frozenset({"requeue"}),
    (W, Q): frozenset({"requeue"}),
    (S, Q): frozenset({"requeue"}),
    (D, Q): frozenset({"requeue"}),
    (C, Q): frozenset({"requeue"}),
}


def allowed(from_state: JobState, to_state: JobState, action: str | None = None) -> bool:
    actions = TRANSITIONS.get((from_state, to_state))
    if actions is None:
        return False
    return action is None or action in actions


def check_transition(
    from_state: JobState | str, to_state: JobState | str, *, job_id: int | None = None
) -> None:
    """Raise :class:`InvalidTransition` unless ``TRANSITIONS`` allows the change."""
    src, dst = JobState(from_state), JobState(to_state)
    if (src, dst) not in TRANSITIONS:
        raise InvalidTransition(job_id, str(src), str(dst))


def sources_of(action: str, to_state: JobState) -> frozenset[JobState]:
    """Every state from which ``action`` may lead to ``to_state``: the SQL guard's list."""
    return frozenset(
        src for (src, dst), acts in TRANSITIONS.items() if dst == to_state and action in acts
    )


@dataclass(frozen=True, slots=True)
class Change:
    """A state change for one running job, written by a fenced statement.

    ``delay`` is seconds from now until ``run_at`` (``None`` keeps ``run_at``);
    ``refund_attempt`` gives back the attempt the claim took (snooze, graceful release);
    ``attempt_outcome`` is what the attempt record says happened.
    """

    action: str
    to_state: JobState
    attempt_outcome: str
    delay: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    result: Any = None
    refund_attempt: bool = False
    bump_version: bool = False

    def __post_init__(self) -> None:
        if not allowed(R, self.to_state, self.action):
            raise InvalidTransition(None, "running", str(self.to_state))

    @property
    def terminal(self) -> bool:
        return self.to_state in (S, D, C)


# ---- named constructors: the only way durq builds a Change -------------------------------


def complete(result: Any = None) -> Change:
    return Change("complete", S, "succeeded", result=result)


def retry(delay: float, code: str, message: str, *, lost: bool = False) -> Change:
    return Change(
        "reclaim" if lost else "retry",
        W,
        "lost" if lost else "failed",
        delay=clamp_delay(delay),
        error_code=storable(code),
        error_message=storable(message),
        bump_version=lost,
    )


def dead_letter(code: str, message: str, *, lost: bool = False) -> Change:
    return Change(
        "reclaim" if lost else "dead_letter",
        D,
        "lost" if lost else "failed",
        error_code=storable(code),
        error_message=storable(message),
        bump_version=lost,
    )


def snooze(delay: float) -> Change:
    return Change("snooze", Q, "snoozed", delay=clamp_delay(delay), refund_attempt=True)


def release() -> Change:
    """Graceful shutdown ran out of time: back to queued, the attempt not spent."""
    return Change(
        "release",
        Q,
        "released",
        delay=0.0,
        refund_attempt=True,
        error_code="released",
        error_message="worker shut down before the job finished; released without using an attempt",
    )


def cancel_running() -> Change:
    return Change(
        "cancel", C, "cancelled", error_code="cancelled", error_message="cancelled by request"
    )


# Non-running changes are single guarded UPDATEs; these name their guards.
def claim() -> frozenset[JobState]:
    return sources_of("claim", R)


def cancel() -> frozenset[JobState]:
    return sources_of("cancel", C) - {R}


def requeue() -> frozenset[JobState]:
    return sources_of("requeue", Q)


# ---- outcomes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Success:
    result: Any = None


@dataclass(frozen=True, slots=True)
class Lost:
    """The lease expired: the attempt is counted and handled like a failure."""

    message: str = "lease expired before the worker finished; the worker is presumed dead"


@dataclass(frozen=True, slots=True)
class Crashed:
    """The process running the task died (an exit, a fatal signal) before it answered.

    A retryable failure under the job's policy, like a lost lease: a crash is often
    transient (memory, a flaky extension), and ``max_attempts`` bounds one that is not."""

    message: str


Outcome = Success | Lost | Crashed | BaseException


def outcome_to_change(
    *,
    attempt: int,
    max_attempts: int,
    policy: RetryPolicy,
    outcome: Outcome,
    classifier: Any = None,
    rng: random.Random | None = None,
) -> Change:
    """The one rule that turns what happened to attempt ``attempt`` into the next state.

    * success → ``succeeded``
    * ``Snooze`` → ``queued`` after its delay, attempt refunded
    * ``Fail`` → ``dead_letter`` now
    * ``Retry``, lost lease, crashed process, or any other exception → ``retry_wait`` after
      the delay (explicit, else ``policy.delay_for(attempt)``) while ``attempt < max_attempts``,
      else ``dead_letter``
    * a ``classifier`` may first map an exception to ``Retry``/``Fail``/``Snooze``.
    """
    if isinstance(outcome, Success):
        return complete(outcome.result)
    if isinstance(outcome, Crashed):
        if attempt >= max_attempts:
            crash = dead_letter(CRASHED, outcome.message)
        else:
            crash = retry(policy.delay_for(attempt, rng), CRASHED, outcome.message)
        return replace(crash, attempt_outcome=CRASHED)
    if isinstance(outcome, Lost):
        if attempt >= max_attempts:
            return dead_letter("lease_expired", outcome.message, lost=True)
        return retry(policy.delay_for(attempt, rng), "lease_expired", outcome.message, lost=True)

    signal: BaseException = outcome
    if not isinstance(signal, TaskSignal) and classifier is not None:
        signal = classifier(signal) or signal
    if isinstance(signal, Snooze):
        return snooze(signal.seconds)
    if isinstance(signal, Fail):
        return dead_letter(signal.code, signal.message)
    if isinstance(signal, Retry):
        code, message, after = signal.code, signal.message, signal.after
    else:
        code, message, after = type(signal).__name__, _message(signal), None
    if attempt >= max_attempts:
        return dead_letter(code, message)
    delay = policy.delay_for(attempt, rng) if after is None else float(after)
    return retry(delay, code, message)


def _message(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def storable(text: str) -> str:
    """``text`` as every database can store it: a NUL (which PostgreSQL text refuses) and
    unpaired surrogates (which UTF-8 cannot encode) are written as escapes. An error message
    is whatever a task raised; it must never make its outcome unwritable."""
    if text.isascii() and "\x00" not in text:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
