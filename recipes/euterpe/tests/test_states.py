"""Seed 003 §3: every allowed transition passes, every other one is refused, and durq's
states and stages map onto Euterpe's statuses."""

from __future__ import annotations

import itertools

import pytest

import durq
from recipes.euterpe import Settings, durq_app
from recipes.euterpe.states import (
    STATUSES,
    TRANSITIONS,
    TransitionRefused,
    check_transition,
    euterpe_status,
)
from recipes.euterpe.tasks import TASK

ALLOWED = [
    ("queued", "claimed"),
    ("claimed", "fetching"),
    ("fetching", "processing"),
    ("processing", "uploading"),
    ("uploading", "succeeded"),
    ("claimed", "queued"),
    ("fetching", "queued"),
    ("processing", "queued"),
    ("uploading", "queued"),
    ("claimed", "failed"),
    ("fetching", "failed"),
    ("processing", "failed"),
    ("uploading", "failed"),
    ("failed", "queued"),
    ("failed", "dead_letter"),
]


def test_the_table_is_the_seeds() -> None:
    assert set(ALLOWED) == TRANSITIONS
    assert len(STATUSES) == 8


@pytest.mark.parametrize("old,new", ALLOWED, ids=[f"{a}->{b}" for a, b in ALLOWED])
def test_allowed_transitions_pass(old: str, new: str) -> None:
    check_transition(old, new, attempt_count=1, max_attempts=3)


REFUSED = [pair for pair in itertools.product(STATUSES, STATUSES) if pair not in TRANSITIONS]


@pytest.mark.parametrize("old,new", REFUSED, ids=[f"{a}->{b}" for a, b in REFUSED])
def test_every_other_transition_is_refused(old: str, new: str) -> None:
    with pytest.raises(TransitionRefused, match="cannot become"):
        check_transition(old, new, attempt_count=0, max_attempts=3)


def test_failed_goes_back_to_queued_only_while_attempts_remain() -> None:
    check_transition("failed", "queued", attempt_count=2, max_attempts=3)
    with pytest.raises(TransitionRefused, match="no retry left"):
        check_transition("failed", "queued", attempt_count=3, max_attempts=3)
    check_transition("failed", "dead_letter", attempt_count=3, max_attempts=3)
    with pytest.raises(TransitionRefused, match="unknown Euterpe status"):
        check_transition("queued", "transcoding")


def test_durq_states_map_onto_euterpe_statuses() -> None:
    assert euterpe_status("queued", None) == "queued"
    assert euterpe_status("retry_wait", None) == "queued"  # failed → queued, written at once
    assert euterpe_status("running", None) == "claimed"
    for stage in ("fetching", "processing", "uploading"):
        assert euterpe_status("running", stage) == stage
    assert euterpe_status("succeeded", None) == "succeeded"
    assert euterpe_status("dead_letter", None) == "dead_letter"
    assert euterpe_status("cancelled", None) == "failed"
    assert {euterpe_status(str(s), None) for s in durq.JobState} <= set(STATUSES)


def test_durq_refuses_stages_out_of_order(sqlite_url: str) -> None:
    """The stage part of the table is durq's: a task's stages only advance in order."""
    app = durq_app(Settings(database_url=sqlite_url))
    task = app.tasks[TASK]
    assert task.stages == ("fetching", "processing", "uploading")
    assert task.next_stage_guard(1, None, "fetching") is None
    assert task.next_stage_guard(1, "fetching", "processing") == "fetching"
    for current, stage in (
        (None, "processing"),
        ("fetching", "uploading"),
        ("uploading", "fetching"),
    ):
        with pytest.raises(durq.InvalidStage):
            task.next_stage_guard(1, current, stage)
    app.close()
