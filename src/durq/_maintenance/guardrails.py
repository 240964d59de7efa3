"""Backlog guardrails: a queue whose ready jobs are too old or too many, for too long.

Each round (leader only) reads every queue's health. A queue over a guardrail (the p95 age
of its ready jobs above ``DURQ_DEGRADED_P95_AGE_SECONDS``, 900, or more ready jobs than
``DURQ_DEGRADED_READY_COUNT``, 500) is marked degraded from the first round that saw it
(``durq_queues.degraded_since``). Once it has stayed so for
``DURQ_DEGRADED_SUSTAIN_SECONDS`` (900) an alert is raised (``category='queue_backlog'``,
``severity='warning'``, key: the queue) and one WARNING logged. The first round that finds
the queue within both guardrails clears the mark and resolves the alert. Safe when two
leaders overlap: the mark keeps its first time, and an open alert is never raised twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from .._drivers import Driver
from .._engine import jobs
from ..settings import Settings

__all__ = ["CATEGORY", "GuardrailRound", "run_once"]

log = logging.getLogger("durq.maintenance")

CATEGORY = "queue_backlog"


@dataclass
class GuardrailRound:
    """What one round found: queues over a guardrail now, alerts raised and resolved."""

    degraded: list[str] = field(default_factory=list)
    alerted: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)


def run_once(driver: Driver, settings: Settings) -> GuardrailRound:
    with driver.read() as ex:
        stats = jobs.queue_stats(
            driver,
            ex,
            degraded_p95_age=settings.degraded_p95_age_seconds,
            degraded_ready=settings.degraded_ready_count,
        )
    found = GuardrailRound()
    for queue, health in sorted(stats.items()):
        with driver.transaction() as ex:
            if health["degraded"]:
                found.degraded.append(queue)
                seconds = driver.queue_mark_degraded(ex, queue)
                if seconds < settings.degraded_sustain_seconds:
                    continue
                if driver.alert_open(ex, category=CATEGORY, key=queue) is not None:
                    continue
                context = _context(health, seconds, settings)
                driver.alert_raise(
                    ex, category=CATEGORY, severity="warning", key=queue, context=context
                )
                found.alerted.append(queue)
                log.warning(
                    "queue %r is degraded: %d ready jobs, p95 age %.0f s, for %.0f s "
                    "(guardrails: more than %d ready or p95 age over %.0f s)",
                    queue,
                    health["ready"],
                    health["p95_age_seconds"] or 0.0,
                    seconds,
                    settings.degraded_ready_count,
                    settings.degraded_p95_age_seconds,
                    extra={"queue": queue, **context},
                )
            elif driver.queue_clear_degraded(ex, queue) and driver.alert_resolve(
                ex, category=CATEGORY, key=queue
            ):
                found.resolved.append(queue)
                log.info("queue %r is within its guardrails again", queue, extra={"queue": queue})
    return found


def _context(health: dict[str, Any], seconds: float, settings: Settings) -> dict[str, Any]:
    return {
        "ready": health["ready"],
        "p95_age_seconds": round(health["p95_age_seconds"] or 0.0, 3),
        "oldest_age_seconds": round(health["oldest_age_seconds"] or 0.0, 3),
        "degraded_for_seconds": round(seconds, 3),
        "max_ready": settings.degraded_ready_count,
        "max_p95_age_seconds": settings.degraded_p95_age_seconds,
    }
