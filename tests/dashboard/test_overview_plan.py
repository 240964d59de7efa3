"""The overview's refresh reads only what it shows: one indexed query per panel, and never
a finished job, however many are retained. (Plans, not timings.)"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durq
from durq._drivers.postgres.driver import PsycopgExecutor
from durq._drivers.sql import SqliteExecutor
from durq._drivers.sqlite.driver import path_from_url

FINISHED_ROWS = 50_000
LIVE_ROWS = 300
#: The overview's panels and the one block each reads.
OVERVIEW_BLOCKS = ["queue_live_counts", "queue_ready_ages", "queue_list", "stats_minutes_since"]
#: How the overview may reach durq_jobs: only through indexes that hold no finished job.
LIVE_INDEXES = {
    "durq_jobs_lease_idx",
    "durq_jobs_ready_idx",
    "durq_jobs_limited_idx",
    "durq_jobs_waiting_idx",
}
PARAMS: dict[str, Any] = {"now": 1.7e9, "since": 0, "queue": "default", "rank": 1}


def _fill(db_url: str) -> None:
    if db_url.startswith("sqlite:"):
        insert = (
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) "
            "INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, run_at, "
            "created_at, updated_at) SELECT 'default', 'plan.check', '{}', ?, 0, 0, "
            "unixepoch() - 60, unixepoch() - 60, unixepoch() - 60 FROM g"
        )
        with sqlite3.connect(path_from_url(db_url)) as conn:
            conn.execute(insert, (FINISHED_ROWS, "succeeded"))
            conn.execute(insert, (LIVE_ROWS, "queued"))
            conn.execute("ANALYZE")
        return
    insert = (
        "INSERT INTO durq_jobs (queue, task, args, state, run_at) "
        "SELECT 'default', 'plan.check', '{}', %s, now() - interval '1 minute' "
        "FROM generate_series(1, %s)"
    )
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(insert, ("succeeded", FINISHED_ROWS))
        conn.execute(insert, ("queued", LIVE_ROWS))
        conn.execute("VACUUM ANALYZE durq_jobs")


@pytest.fixture
def filled_app(db_url: str) -> Iterator[durq.App]:
    app = durq.App(db_url)
    app.migrate()
    _fill(db_url)
    yield app
    app.close()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _postgres_reads(url: str, sql: str) -> set[tuple[str, str | None]]:
    with psycopg.connect(url) as conn:
        row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, PARAMS).fetchone()
        conn.rollback()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return {
        (n["Node Type"], n.get("Index Name"))
        for n in _nodes(plan[0]["Plan"])
        if n.get("Relation Name") == "durq_jobs"
    }


def _sqlite_reads(url: str, sql: str) -> set[tuple[str, str | None]]:
    with sqlite3.connect(path_from_url(url)) as conn:
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, PARAMS).fetchall()
    found = set()
    for *_, detail in rows:
        if re.search(r"\b(SCAN|SEARCH) durq_jobs\b", detail):
            index = re.search(r"USING (?:COVERING )?INDEX (\w+)", detail)
            found.add((detail.split()[0], index.group(1) if index else None))
    return found


def test_the_overview_runs_one_query_per_panel(
    filled_app: durq.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    for executor in (PsycopgExecutor, SqliteExecutor):
        original = executor.run

        def run(self: Any, name: str, params: Any = None, _original: Any = original) -> Any:
            ran.append(name)
            return _original(self, name, params)

        monkeypatch.setattr(executor, "run", run)
    views = filled_app.overview()
    # SQLite has no percentile function: its ready-ages panel reads the p95 row of each
    # queue with one more indexed query (one queue here).
    assert [b for b in ran if b != "queue_ready_age_at"] == OVERVIEW_BLOCKS
    assert ran.count("queue_ready_age_at") == (
        1 if filled_app.database_url.startswith("sqlite") else 0
    )
    assert [(v.name, v.counts["queued"]) for v in views] == [("default", LIVE_ROWS)]


def test_the_overview_never_scans_finished_jobs(filled_app: durq.App, db_url: str) -> None:
    queries = filled_app.driver.queries
    sqlite_only = ["queue_ready_age_at"] if db_url.startswith("sqlite:") else []
    for block in OVERVIEW_BLOCKS + sqlite_only:
        if db_url.startswith("sqlite:"):
            reads = _sqlite_reads(db_url, queries.named[block])
            # SCAN of a partial index is fine: it holds no finished job.
            full_scans = {r for r in reads if r[0] == "SCAN" and r[1] is None}
        else:
            reads = _postgres_reads(db_url, queries.pyformat[block])
            full_scans = {r for r in reads if r[0] == "Seq Scan"}
        assert not full_scans, f"{block} scans durq_jobs, finished jobs included: {reads}"
        indexes = {index for _, index in reads}
        assert indexes <= LIVE_INDEXES, f"{block} reads durq_jobs through {indexes}"


# ---- the rollup that keeps the history: recent attempts only, through indexes ----------

#: How the rollup may reach durq_jobs: succeeded jobs by their finish time, others by id.
ROLLUP_INDEXES = {"durq_jobs_finished_idx", "durq_jobs_pkey"}


def _fill_finished(db_url: str) -> None:
    """A day of succeeded jobs, one a second, newest last, each stored on its job row only
    (durq_attempts is empty, and its statistics say so), with every 25th dead-lettered."""
    if db_url.startswith("sqlite:"):
        insert = (
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) "
            "INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, worker_id, "
            "run_at, created_at, updated_at, attempted_at, finished_at, runtime_ms) "
            "SELECT 'default', 'plan.check', '{}', "
            "CASE WHEN n % 25 = 0 THEN 'dead_letter' ELSE 'succeeded' END, 1, 1, 'w', "
            "t, t, t, t, t, 1 FROM (SELECT n, unixepoch() - (? - n) AS t FROM g)"
        )
        with sqlite3.connect(path_from_url(db_url)) as conn:
            conn.execute(insert, (FINISHED_ROWS, FINISHED_ROWS))
            conn.execute("ANALYZE")
        return
    insert = (
        "INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, worker_id, "
        "run_at, attempted_at, finished_at, runtime_ms) "
        "SELECT 'default', 'plan.check', '{}', "
        "CASE WHEN g %% 25 = 0 THEN 'dead_letter' ELSE 'succeeded' END, 1, 1, 'w', t, t, t, 1 "
        "FROM (SELECT g, now() - (%s - g) * interval '1 second' AS t "
        "      FROM generate_series(1, %s) AS g) s"
    )
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(insert, (FINISHED_ROWS, FINISHED_ROWS))
        conn.execute("VACUUM ANALYZE")


def test_the_rollup_reads_succeeded_jobs_through_their_finish_index(db_url: str) -> None:
    app = durq.App(db_url)
    app.migrate()
    _fill_finished(db_url)
    queries = app.driver.queries
    params = {"since": time.time() - 120}
    if db_url.startswith("sqlite:"):
        with sqlite3.connect(path_from_url(db_url)) as conn:
            plan = [
                r[-1]
                for r in conn.execute("EXPLAIN QUERY PLAN " + queries.named["stats_rollup"], params)
            ]
        jobs = [line for line in plan if re.match(r"(SCAN|SEARCH) (j|durq_jobs)\b", line)]
        assert jobs and all(line.startswith("SEARCH") for line in jobs), plan
        assert any("durq_jobs_finished_idx" in line for line in jobs), plan
    else:
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "EXPLAIN (FORMAT JSON) " + queries.pyformat["stats_rollup"], params
            ).fetchone()
        assert row is not None
        nodes = list(_nodes(row[0][0]["Plan"]))
        reads = {
            (n["Node Type"], n.get("Index Name"))
            for n in nodes
            if n.get("Relation Name") == "durq_jobs"
        }
        assert not {r for r in reads if r[0] == "Seq Scan"}, reads
        assert {index for _, index in reads} - {None} <= ROLLUP_INDEXES, reads
        assert "durq_jobs_finished_idx" in {n.get("Index Name") for n in nodes}, reads
    app.close()
