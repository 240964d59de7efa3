"""Retry policies and the outcome → state rule, without a database."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durq
from durq import states
from durq.errors import ConfigurationError, InvalidTransition
from durq.retry import policy_from_dict


def test_fixed_indexes_attempt_minus_one_and_repeats_the_last() -> None:
    policy = durq.Fixed((60, 300, 900, 3600, 21600))
    assert [policy.delay_for(n) for n in range(1, 8)] == [60, 300, 900, 3600, 21600, 21600, 21600]
    assert [durq.Fixed([2, 10, 30]).delay_for(n) for n in (1, 2, 3, 4)] == [2, 10, 30, 30]


@given(attempt=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_exponential_seed_004_stays_within_jitter_and_cap(attempt: int, seed: int) -> None:
    policy = durq.Exponential(base=60, factor=2, jitter=0.1, cap=1800)
    delay = policy.delay_for(attempt, random.Random(seed))
    nominal = 60 * 2 ** (attempt - 1)
    assert min(nominal * 0.9, 1800) <= delay <= min(nominal * 1.1, 1800)


def test_exponential_without_jitter_is_exact() -> None:
    policy = durq.Exponential(base=1, factor=2, cap=10)
    assert [policy.delay_for(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_policies_round_trip_through_json() -> None:
    for policy in (durq.Fixed([1, 2]), durq.Exponential(base=3, factor=1.5, jitter=0.2, cap=9)):
        assert policy_from_dict(policy.to_dict()) == policy


@pytest.mark.parametrize(
    "make",
    [
        lambda: durq.Fixed([]),
        lambda: durq.Fixed([-1]),
        lambda: durq.Exponential(factor=0.5),
        lambda: durq.Exponential(jitter=1.5),
        lambda: durq.Exponential(cap=-3),
    ],
)
def test_bad_policies_are_refused_with_a_fix(make: object) -> None:
    with pytest.raises(ConfigurationError, match=r"must|needs|fraction"):
        make()  # type: ignore[operator]


def test_outcome_to_change_covers_each_outcome() -> None:
    policy = durq.Fixed([60, 300])

    def rule(outcome: states.Outcome) -> states.Change:
        return states.outcome_to_change(attempt=1, max_attempts=3, policy=policy, outcome=outcome)

    assert rule(states.Success(5)).to_state == "succeeded"
    retry = rule(ValueError("bad"))
    assert (retry.to_state, retry.delay, retry.error_code, retry.error_message) == (
        "retry_wait",
        60,
        "ValueError",
        "bad",
    )
    last = states.outcome_to_change(attempt=3, max_attempts=3, policy=policy, outcome=ValueError())
    assert (last.to_state, last.error_message) == ("dead_letter", "ValueError")
    assert rule(durq.Retry(after=5)).delay == 5
    assert rule(durq.Fail("x")).to_state == "dead_letter"
    snooze = rule(durq.Snooze(9))
    assert (snooze.to_state, snooze.refund_attempt, snooze.delay) == ("queued", True, 9)
    lost = rule(states.Lost())
    assert (lost.to_state, lost.attempt_outcome, lost.bump_version) == ("retry_wait", "lost", True)


def test_changes_not_in_the_table_cannot_be_built() -> None:
    with pytest.raises(InvalidTransition, match="'running' to 'retry_wait'"):
        states.Change("complete", durq.JobState.RETRY_WAIT, "x")
