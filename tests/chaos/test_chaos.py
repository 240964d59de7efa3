"""The short chaos run in ``make test``: 2,000 jobs (one in ten with a webhook), three
worker processes, and every fault kind at least once while they drain (``make chaos``
runs 20,000; docs/reliability.md has its figures)."""

from __future__ import annotations

import pytest

from .run import FAULTS, Config, run

pytestmark = pytest.mark.slow


def test_short_chaos_run_loses_nothing_under_every_fault_kind() -> None:
    lines: list[str] = []
    report = run(Config(jobs=2_000, feed_rate=200, timeout=150), say=lines.append)
    table = report.table()
    assert report.ok, table + "\n" + "\n".join(lines)
    assert {f.kind for f in report.faults} == set(FAULTS)
    assert report.exactly_once == report.jobs == 2_000
    assert report.events > 0 and report.events_received == report.events
