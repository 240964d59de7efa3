"""The rules of outbox delivery: what a delivery outcome leads to, and the request body.

Retries back off exponentially with full jitter (a uniform delay between 0 and
``min(cap, base * 2**(attempt-1))``), counted by the event's own ``attempt``, apart from
the job's execution attempts; past ``max_attempts`` the event goes to the outbox dead
letter. A lease that expired counts as a failed attempt and is reclaimed with a new
``claim_version``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

from .._drivers import DeliveryWrite, Driver
from ..errors import LeaseLost
from ..settings import Settings
from ..types import OutboxEvent

__all__ = [
    "DeliveryPolicy",
    "backoff",
    "body",
    "outcome_write",
    "reclaim_write",
    "reread_writes",
]


@dataclass(frozen=True)
class DeliveryPolicy:
    max_attempts: int = 8
    base: float = 1.0
    cap: float = 600.0

    @classmethod
    def from_settings(cls, s: Settings) -> DeliveryPolicy:
        return cls(s.webhook_max_attempts, s.webhook_backoff_base, s.webhook_backoff_cap)


def backoff(attempt: int, policy: DeliveryPolicy, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**(attempt-1))]."""
    exponent = min(max(attempt, 1) - 1, 60)  # 2**60 seconds is past any cap
    ceiling = min(policy.cap, policy.base * 2.0**exponent)
    return (rng or random).uniform(0, ceiling)


def outcome_write(
    event: OutboxEvent,
    status: int | None,
    error: str | None,
    policy: DeliveryPolicy,
    *,
    rng: random.Random | None = None,
) -> DeliveryWrite:
    """A 2xx answer delivers; anything else retries until the attempts run out."""
    if status is not None and 200 <= status < 300:
        return DeliveryWrite(event.id, event.claim_version, "delivered", status=status)
    reason = error or f"the receiver answered HTTP {status}"
    if event.attempt >= policy.max_attempts:
        return DeliveryWrite(
            event.id, event.claim_version, "dead_letter", status=status, error=reason[:1000]
        )
    delay = backoff(event.attempt, policy, rng)
    return DeliveryWrite(
        event.id, event.claim_version, "pending", delay=delay, status=status, error=reason[:1000]
    )


def reclaim_write(event: OutboxEvent, policy: DeliveryPolicy) -> DeliveryWrite:
    """An expired delivery lease: a failed attempt, taken back with a new claim_version."""
    write = outcome_write(
        event, None, "the delivery lease expired; the delivering worker is presumed dead", policy
    )
    return DeliveryWrite(
        write.id, write.claim_version, write.to_state, write.delay, None, write.error, bump=True
    )


def body(event: OutboxEvent) -> bytes:
    """The request body: the same bytes on every attempt, so the receiver can dedupe."""
    document = {
        "event_id": event.event_id,
        "type": event.event_type,
        "job_id": event.job_id,
        "sequence": event.id,
        "created_at": event.created_at.isoformat(),
        "data": event.payload,
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def reread_writes(
    driver: Driver, held: Sequence[tuple[OutboxEvent, DeliveryWrite]]
) -> list[OutboxEvent | LeaseLost]:
    """For delivery outcomes whose commit went unanswered and whose retry then matched
    nothing: the event still at the write's ``claim_version`` and in the state it wrote
    means the first try landed; anything else, another owner has it."""
    out: list[OutboxEvent | LeaseLost] = []
    with driver.read() as ex:
        for event, write in held:
            now = driver.outbox_get(ex, event.event_id)
            landed = (
                now is not None
                and now.claim_version == write.claim_version + int(write.bump)
                and now.state == write.to_state
            )
            if landed and now is not None:
                out.append(now)
            else:
                out.append(LeaseLost(write.id, write.claim_version))
    return out
