"""The named SQL blocks keep the promises the Python side relies on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durq._drivers
from durq._drivers.rows import JOB_FIELDS
from durq._drivers.sql import load_queries

DRIVERS = Path(durq._drivers.__file__).parent
SHARED = DRIVERS / "shared"
DIALECTS = sorted(p.name for p in DRIVERS.iterdir() if (p / "migrations").is_dir())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_job_columns_come_in_the_order_of_jobs_fields(dialect: str) -> None:
    # The claim decodes rows by position (Driver.job_from_values).
    block = load_queries(DRIVERS / dialect, SHARED)["job_columns"]
    names = [
        re.sub(r"(?is)^.*\bAS\s+(\w+)$", r"\1", column.strip())
        for column in re.split(r",(?![^(]*\))", block)
    ]
    assert names == list(JOB_FIELDS)


def test_a_block_defined_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text("-- name: job_get\nSELECT 1\n")
    with pytest.raises(RuntimeError, match="job_get"):
        load_queries(tmp_path, SHARED)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_loads_the_shared_blocks(dialect: str) -> None:
    shared = set(re.findall(r"^-- name: (\w+)$", (SHARED / "queries.sql").read_text(), re.M))
    assert shared and shared <= set(load_queries(DRIVERS / dialect, SHARED).named)
