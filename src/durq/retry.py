"""Retry policies and the signals a task raises to steer its own retries.

A policy answers one question: after attempt ``n`` failed, how many seconds until the next
one? Whether there *is* a next one is decided by ``max_attempts`` in :mod:`durq.states`.

Policies are stored on each job as JSON (``to_dict``), so any process, including the
lease reclaimer that does not import your tasks, applies the same schedule.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ConfigurationError

__all__ = [
    "MAX_DELAY_SECONDS",
    "Classifier",
    "Exponential",
    "Fail",
    "Fixed",
    "Retry",
    "RetryPolicy",
    "Snooze",
    "TaskSignal",
    "policy_from_dict",
]


#: No retry, snooze or scheduled delay is longer than this (365 days): a longer one is
#: clamped where it is made, so it can always be stored as a time.
MAX_DELAY_SECONDS = 365 * 24 * 3600.0


def clamp_delay(seconds: float) -> float:
    return min(float(seconds), MAX_DELAY_SECONDS)


def _finite_non_negative(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value >= 0


class RetryPolicy(Protocol):
    def delay_for(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Fixed:
    """A fixed schedule: ``delays[attempt-1]``, the last element repeating.

    For example ``Fixed((60, 300, 900, 3600, 21600))`` with ``max_attempts=5``, or
    ``Fixed((2, 10, 30))`` (the last delay repeats).
    """

    delays: Sequence[float]

    def __post_init__(self) -> None:
        delays = tuple(self.delays)
        if not delays:
            raise ConfigurationError("Fixed() needs at least one delay, e.g. Fixed([60, 300])")
        if any(not _finite_non_negative(d) for d in delays):
            raise ConfigurationError(
                f"Fixed() delays must be finite numbers >= 0 seconds, got {list(delays)}"
            )
        object.__setattr__(self, "delays", delays)

    def delay_for(self, attempt: int, rng: random.Random | None = None) -> float:
        index = min(max(attempt, 1) - 1, len(self.delays) - 1)
        return clamp_delay(self.delays[index])

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "fixed", "delays": list(self.delays)}


@dataclass(frozen=True)
class Exponential:
    """``base * factor**(attempt-1)``, scaled by a uniform ±``jitter`` fraction, capped at ``cap``.

    For example 1, 2, 4, 8, 16 minutes, ±10 %, at most 30 minutes, 5 retries:
    ``Exponential(base=60, factor=2, jitter=0.1, cap=1800)`` with ``max_attempts=6``.
    """

    base: float = 1.0
    factor: float = 2.0
    jitter: float = 0.0
    cap: float | None = None

    def __post_init__(self) -> None:
        if not _finite_non_negative(self.base):
            raise ConfigurationError(f"Exponential(base=...) must be >= 0 seconds, got {self.base}")
        if not (math.isfinite(self.factor) and self.factor >= 1):
            raise ConfigurationError(f"Exponential(factor=...) must be >= 1, got {self.factor}")
        if not (0 <= self.jitter < 1):
            raise ConfigurationError(
                f"Exponential(jitter=...) is a fraction in [0, 1), e.g. 0.1 for ±10 %, "
                f"got {self.jitter}"
            )
        if self.cap is not None and not _finite_non_negative(self.cap):
            raise ConfigurationError(f"Exponential(cap=...) must be >= 0 seconds, got {self.cap}")

    def delay_for(self, attempt: int, rng: random.Random | None = None) -> float:
        exponent = max(attempt, 1) - 1
        # Cap before exponentiating: factor**exponent overflows a float near attempt 1,100.
        limit = min(self.cap if self.cap is not None else MAX_DELAY_SECONDS, MAX_DELAY_SECONDS)
        ceiling = limit / (1 - self.jitter)  # even the lowest jitter stays at the limit
        if self.base == 0:
            raw = 0.0
        elif self.factor > 1 and exponent * math.log(self.factor) > math.log(ceiling / self.base):
            raw = ceiling
        else:
            raw = self.base * self.factor**exponent
        if self.jitter:
            raw *= 1 + (rng or random).uniform(-self.jitter, self.jitter)
        return float(min(raw, limit))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "exponential",
            "base": self.base,
            "factor": self.factor,
            "jitter": self.jitter,
            "cap": self.cap,
        }


def policy_from_dict(data: dict[str, Any] | None) -> RetryPolicy:
    """Rebuild a policy stored on a job row. An empty dict means the default policy."""
    if not data:
        return DEFAULT_POLICY
    kind = data.get("kind")
    if kind == "fixed":
        return Fixed(data["delays"])
    if kind == "exponential":
        return Exponential(
            base=data["base"], factor=data["factor"], jitter=data["jitter"], cap=data["cap"]
        )
    raise ConfigurationError(
        f"unknown retry policy kind {kind!r}; expected 'fixed' or 'exponential'"
    )


# Oban-like default: grows quickly, never waits more than an hour.
DEFAULT_POLICY: RetryPolicy = Exponential(base=2.0, factor=2.0, jitter=0.1, cap=3600.0)


class TaskSignal(Exception):
    """Base of the exceptions a task raises to choose its own outcome."""


class Retry(TaskSignal):
    """Retry after ``after`` seconds (uses an attempt; dead-letters if none are left).

    ``after=None`` means "use the task's retry policy".
    """

    def __init__(
        self, after: float | None = None, *, code: str = "retry", message: str | None = None
    ) -> None:
        if after is not None and not _finite_non_negative(after):
            raise ValueError(f"Retry(after=...) must be >= 0 seconds, got {after}")
        self.after = None if after is None else clamp_delay(after)
        self.code = code
        self.message = message or (
            f"retry requested after {after}s" if after else "retry requested"
        )
        super().__init__(self.message)


class Fail(TaskSignal):
    """Fail now, without retrying: the job goes to ``dead_letter`` with ``code``."""

    def __init__(self, code: str, message: str | None = None) -> None:
        self.code = code
        self.message = message or code
        super().__init__(f"{code}: {self.message}")


class Snooze(TaskSignal):
    """Run again after ``seconds`` without using an attempt."""

    def __init__(self, seconds: float) -> None:
        if not _finite_non_negative(seconds):
            raise ValueError(f"Snooze(seconds) must be >= 0, got {seconds}")
        self.seconds = clamp_delay(seconds)
        super().__init__(f"snoozed for {self.seconds:g}s")


#: Maps an exception a task raised to a signal (``Retry``, ``Fail``, ``Snooze``), or
#: ``None`` to apply the default rule (retry by the task's policy).
Classifier = Callable[[BaseException], TaskSignal | None]
