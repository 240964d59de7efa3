"""Keys a job may name, and what durq keeps per key: circuit breakers, per-key limits,
and the alerts they (and other guardrails) raise. Plain data; no I/O here."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from .errors import ValidationError

__all__ = [
    "DEFAULT_BREAKER",
    "Alert",
    "Breaker",
    "BreakerRule",
    "Limit",
    "LimitState",
    "rule_for",
    "validate_key",
]

MAX_KEY_LENGTH = 255


@dataclass(frozen=True, slots=True)
class BreakerRule:
    """After ``threshold`` consecutive failed attempts under a key, pause it ``pause``
    seconds; then one probe job runs, and its success closes the breaker."""

    threshold: int = 5
    pause: float = 1800.0

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int):
            raise ValidationError(
                f"breaker threshold must be an integer >= 1, got {self.threshold!r}"
            )
        if self.threshold < 1:
            raise ValidationError(f"breaker threshold must be >= 1, got {self.threshold}")
        if not _positive(self.pause):
            raise ValidationError(
                f"breaker pause must be a number of seconds > 0, got {self.pause!r}; "
                "e.g. 1800 for 30 minutes"
            )


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``concurrency`` jobs of a key running at once, and at most ``rate`` starts
    per ``per`` seconds (windows aligned to the clock: ``[k·per, (k+1)·per)``)."""

    concurrency: int | None = None
    rate: int | None = None
    per: float = 1.0

    def __post_init__(self) -> None:
        for name in ("concurrency", "rate"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValidationError(
                    f"limit {name} must be an integer >= 1 or None, got {value!r}"
                )
        if self.concurrency is None and self.rate is None:
            raise ValidationError(
                "a Limit needs concurrency=N (running at once), rate=N (starts per window), "
                "or both; e.g. Limit(concurrency=2) or Limit(rate=10, per=60)"
            )
        if not _positive(self.per):
            raise ValidationError(f"limit per must be a number of seconds > 0, got {self.per!r}")


R = TypeVar("R", BreakerRule, Limit)


def rule_for(key: str, rules: Mapping[str, R], default: R | None) -> R | None:
    """The rule of the first pattern (``fnmatch`` style, in the order given) that matches
    ``key``; an exact key wins over any pattern."""
    if key in rules:
        return rules[key]
    for pattern, rule in rules.items():
        if fnmatch.fnmatchcase(key, pattern):
            return rule
    return default


def validate_key(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_KEY_LENGTH:
        raise ValidationError(
            f"{what} must be a non-empty string of at most {MAX_KEY_LENGTH} characters, "
            f"got {value!r}; e.g. 'connector-7:pair-42'"
        )
    return value


def _positive(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value > 0
    )


DEFAULT_BREAKER = BreakerRule()


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True, slots=True)
class Breaker:
    """One row of ``durq_breakers``. ``state`` is ``closed``, ``open`` (paused until
    ``paused_until``) or ``half_open`` (the pause is over; a probe decides)."""

    key: str
    consecutive_failures: int
    last_failure_at: datetime | None
    paused_until: datetime | None
    held_until: datetime | None
    opened_count: int
    threshold: int
    pause_seconds: float
    now: datetime

    @property
    def state(self) -> str:
        if self.paused_until is None:
            return "closed"
        return "open" if self.paused_until > self.now else "half_open"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "state": self.state,
            "consecutive_failures": self.consecutive_failures,
            "last_failure_at": _ts(self.last_failure_at),
            "paused_until": _ts(self.paused_until),
            "opened_count": self.opened_count,
            "threshold": self.threshold,
            "pause_seconds": self.pause_seconds,
        }


@dataclass(frozen=True, slots=True)
class LimitState:
    """One row of ``durq_limits``: the limits in force for a key and what is spent."""

    key: str
    concurrency: int | None
    rate: int | None
    per: float
    running: int
    window_start: float
    window_count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "per": self.per,
            "running": self.running,
            "window_count": self.window_count,
        }


@dataclass(frozen=True, slots=True)
class Alert:
    """One row of ``durq_alerts``; open while ``resolved_at`` is None."""

    id: int
    category: str
    severity: str
    key: str
    context: dict[str, Any]
    first_seen: datetime
    last_seen: datetime
    count: int
    resolved_at: datetime | None
    acked_at: datetime | None

    @property
    def open(self) -> bool:
        return self.resolved_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "severity": self.severity,
            "key": self.key,
            "context": self.context,
            "first_seen": _ts(self.first_seen),
            "last_seen": _ts(self.last_seen),
            "count": self.count,
            "state": "open" if self.open else "resolved",
            "resolved_at": _ts(self.resolved_at),
            "acked_at": _ts(self.acked_at),
        }
