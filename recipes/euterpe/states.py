"""Seed 003 §3: the inbox state machine, and how durq's states and stages map onto it.

durq has one vocabulary (``queued``, ``running`` with a stage, ``retry_wait``, ``succeeded``,
``dead_letter``, ``cancelled``); Euterpe's statuses are a view of it:

============================  =======================================================
Euterpe status                durq
============================  =======================================================
``queued``                    ``queued``, or ``retry_wait`` (a failed attempt, retry due)
``claimed``                   ``running``, no stage yet
``fetching`` / ``processing``  ``running`` at that stage (the task's declared stages,
/ ``uploading``               which durq only lets advance in order)
``succeeded``                 ``succeeded``
``failed``                    ``cancelled`` (an operator stopped it)
``dead_letter``               ``dead_letter``
============================  =======================================================

A seed ``failed`` attempt is never at rest in durq: the failure and its retry decision are
written together, as ``retry_wait`` (``failed → queued`` while attempts remain) or
``dead_letter`` (``failed → dead_letter`` once they are spent or the error is terminal).
"""

from __future__ import annotations

from typing import Any

import durq

__all__ = [
    "ACTIVE",
    "STAGES",
    "STATUSES",
    "TERMINAL",
    "TRANSITIONS",
    "TransitionRefused",
    "check_transition",
    "euterpe_status",
    "event_status",
    "status_of",
]

STAGES = ("fetching", "processing", "uploading")
ACTIVE = ("claimed", *STAGES)
TERMINAL = ("succeeded", "failed", "dead_letter")
STATUSES = ("queued", *ACTIVE, *TERMINAL)

#: Every allowed transition of seed 003 §3; anything else is refused.
TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {
        ("queued", "claimed"),
        ("claimed", "fetching"),
        ("fetching", "processing"),
        ("processing", "uploading"),
        ("uploading", "succeeded"),
        *((status, "queued") for status in ACTIVE),
        *((status, "failed") for status in ACTIVE),
        ("failed", "queued"),
        ("failed", "dead_letter"),
    }
)


class TransitionRefused(ValueError):
    """A status change seed 003 §3 does not allow."""


def check_transition(old: str, new: str, *, attempt_count: int = 0, max_attempts: int = 1) -> None:
    """Raise ``TransitionRefused`` unless seed 003 §3 allows ``old → new``: the table,
    plus ``failed → queued`` only while ``attempt_count < max_attempts``."""
    for status in (old, new):
        if status not in STATUSES:
            raise TransitionRefused(
                f"unknown Euterpe status {status!r}; the statuses are {', '.join(STATUSES)}"
            )
    if (old, new) not in TRANSITIONS:
        raise TransitionRefused(
            f"Euterpe status {old!r} cannot become {new!r} (seed 003 §3 does not allow it)"
        )
    if (old, new) == ("failed", "queued") and attempt_count >= max_attempts:
        raise TransitionRefused(
            f"a failed job with {attempt_count} of {max_attempts} attempts used has no retry "
            "left: it goes to dead_letter, not back to queued"
        )


def euterpe_status(state: str, stage: str | None) -> str:
    """The Euterpe status of a durq job state (and stage while running)."""
    if state in ("queued", "retry_wait"):
        return "queued"
    if state == "running":
        return stage if stage in STAGES else "claimed"
    if state == "cancelled":
        return "failed"
    return state  # succeeded, dead_letter


def status_of(job: durq.Job) -> str:
    return euterpe_status(str(job.state), job.stage)


def event_status(data: dict[str, Any]) -> str:
    """The Euterpe status a durq webhook event's ``data`` announces."""
    return euterpe_status(str(data["state"]), data.get("stage"))
