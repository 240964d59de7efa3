"""Row decoding shared by both dialects."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, fields
from datetime import UTC, datetime

import pytest

from durq._drivers.rows import new_job, policy_in
from durq.types import Job, JobState


def test_policy_in_decodes_a_stored_policy_into_a_dict_of_its_own() -> None:
    stored = json.dumps({"kind": "fixed", "delays": [1.0, 5.0]})

    first = policy_in(stored)
    first["delays"].append(60.0)
    first["kind"] = "changed"

    assert policy_in(stored) == {"kind": "fixed", "delays": [1.0, 5.0]}


def test_policy_in_reads_empty_and_already_decoded_values() -> None:
    assert policy_in(None) == {}
    assert policy_in("{}") == {}
    assert policy_in({"kind": "exponential"}) == {"kind": "exponential"}


def test_new_job_builds_the_same_frozen_job_as_its_constructor() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    values: tuple[object, ...] = (7, "q", "t", {"n": 1}, JobState.RUNNING, None, 2, 1, 5, 3, "w")
    values += (at, at, at, at, None, at, at, "E", "boom", None, {"kind": "fixed"}, True)
    values += ("u", "k", "b", "c")
    job = new_job(values)
    assert job == Job(*values)  # type: ignore[arg-type]
    assert [getattr(job, f.name) for f in fields(Job)] == list(values)
    with pytest.raises(FrozenInstanceError):
        job.state = JobState.SUCCEEDED  # type: ignore[misc]
    with pytest.raises(ValueError, match="shorter"):
        new_job(values[:-1])
