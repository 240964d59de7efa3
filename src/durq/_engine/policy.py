"""The one place an attempt's outcome becomes the job's next state, for every caller:
the worker, the lease reclaimer, ``App.run_job`` and the testing helpers.

The retry policy is the one stored on the job at enqueue (the task's, or the resolved
default), so a process that does not import the task applies the same schedule. If the
rule itself fails (an unreadable stored policy, a classifier that raises), the job is
dead-lettered as ``outcome_unwritable`` with the reason instead of being left running.
"""

from __future__ import annotations

import logging

from .. import states
from ..retry import DEFAULT_POLICY, Classifier, RetryPolicy, policy_from_dict
from ..types import Job

__all__ = ["OUTCOME_UNWRITABLE", "job_policy", "next_change", "unwritable"]

log = logging.getLogger("durq.engine")

OUTCOME_UNWRITABLE = "outcome_unwritable"


def job_policy(job: Job) -> RetryPolicy:
    """The job's stored schedule (rows from before policies were always stored hold ``{}``,
    which means the default)."""
    return policy_from_dict(job.retry_policy)


def next_change(
    job: Job, outcome: states.Outcome, classifier: Classifier | None = None
) -> states.Change:
    """The change attempt ``job.attempt``'s ``outcome`` leads to; never raises."""
    try:
        # A success never reads the schedule: skip decoding it (most outcomes are these).
        success = isinstance(outcome, states.Success)
        return states.outcome_to_change(
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            policy=DEFAULT_POLICY if success else job_policy(job),
            outcome=outcome,
            classifier=classifier,
        )
    except Exception as exc:
        log.error(
            "job %s (%s): could not decide its next state (%s: %s); dead-lettering it",
            job.id,
            job.task,
            type(exc).__name__,
            exc,
        )
        lost = isinstance(outcome, states.Lost)
        return unwritable(f"{type(exc).__name__}: {exc}", lost=lost)


def unwritable(reason: str, *, lost: bool = False) -> states.Change:
    """Dead-letter a job whose outcome cannot be decided or stored, saying why."""
    return states.dead_letter(
        OUTCOME_UNWRITABLE,
        f"the attempt's outcome could not be written ({reason}); fix the cause and requeue the job",
        lost=lost,
    )
