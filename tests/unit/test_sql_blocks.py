"""The named SQL blocks keep the promises the Python side relies on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durq._drivers
from durq._drivers.rows import JOB_FIELDS
from durq._drivers.sql import load_queries

DIALECTS = sorted(
    p.name for p in Path(durq._drivers.__file__).parent.iterdir() if (p / "queries.sql").exists()
)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_job_columns_come_in_the_order_of_jobs_fields(dialect: str) -> None:
    # The claim decodes rows by position (Driver.job_from_values).
    block = load_queries(Path(durq._drivers.__file__).parent / dialect)["job_columns"]
    names = [
        re.sub(r"(?is)^.*\bAS\s+(\w+)$", r"\1", column.strip())
        for column in re.split(r",(?![^(]*\))", block)
    ]
    assert names == list(JOB_FIELDS)
