"""The claim must stay an index scan of the ready rows, however many finished rows the
table keeps: a sequential scan or a sort of the table would make every claim slower as
history grows (PostgreSQL and SQLite). The worker's batched finish must fetch its jobs
by primary key, even when the statistics say that no job is running. (Plans, not
timings: nothing here measures speed.)"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.sql import SQL, Literal

import durq
from durq import states
from durq._drivers.base import FinishRequest
from durq._drivers.postgres.driver import PostgresDriver

FINISHED_ROWS = 50_000
READY_ROWS = 200

# Values for every parameter a claim statement may name.
CLAIM_PARAMS: dict[str, Any] = {
    "queue": "default",
    "queues": ["default"],
    "worker_id": "plan-check",
    "limit": 100,
    "lease_seconds": 30.0,
    "now": None,
}


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(_nodes(child))
    return found


@pytest.fixture
def filled_pg_url(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO durq_jobs (queue, task, args, state, attempt, claim_version, "
            "attempted_at, finished_at) "
            "SELECT 'default', 'plan.check', jsonb_build_object('n', g), 'succeeded', 1, 1, "
            "now(), now() FROM generate_series(1, %s) AS g",
            (FINISHED_ROWS,),
        )
        conn.execute(
            "INSERT INTO durq_jobs (queue, task, args) "
            "SELECT 'default', 'plan.check', jsonb_build_object('n', g) "
            "FROM generate_series(1, %s) AS g",
            (READY_ROWS,),
        )
        conn.execute("VACUUM ANALYZE durq_jobs")
    return pg_url


def test_claim_reads_the_ready_index_with_50k_finished_rows(filled_pg_url: str) -> None:
    app = durq.App(filled_pg_url)
    try:
        sql = app.driver.queries.pyformat["job_claim"]
        used = set(re.findall(r"%\((\w+)\)s", sql))
        missing = used - set(CLAIM_PARAMS)
        assert not missing, f"job_claim names parameters this test does not know: {missing}"
        params = {name: CLAIM_PARAMS[name] for name in used}
        with psycopg.connect(filled_pg_url) as conn:
            row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
            conn.rollback()
    finally:
        app.close()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    nodes = _nodes(plan[0]["Plan"])
    on_jobs = [n for n in nodes if n.get("Relation Name") == "durq_jobs"]
    scans = {(n["Node Type"], n.get("Index Name")) for n in on_jobs}
    assert ("Seq Scan", None) not in scans, f"the claim scans durq_jobs sequentially: {scans}"
    assert any(
        node_type in ("Index Scan", "Index Only Scan") and index == "durq_jobs_ready_idx"
        for node_type, index in scans
    ), f"the claim does not read durq_jobs_ready_idx: {scans}"
    # The one sort allowed orders the per-key limit rows (``durq_limits l``: one row per
    # key with a limit, none here) to pick which keys get budget first; the ready jobs
    # themselves are read in index order.
    sorts = [n for n in nodes if n["Node Type"] == "Sort"]
    job_sorts = [n for n in sorts if not all(k.startswith("l.") for k in n["Sort Key"])]
    assert not job_sorts, (
        "the claim sorts the ready rows instead of reading them in index order: "
        f"{[n['Sort Key'] for n in job_sorts]}"
    )


@pytest.mark.parametrize("plan_mode", ["custom", "generic"])
def test_finish_fetches_jobs_by_primary_key_even_with_stale_statistics(
    filled_pg_url: str, plan_mode: str
) -> None:
    # The fixture analysed the table while no job was running; now a worker holds 100.
    # "generic" is the cached plan a prepared statement switches to after a few runs.
    app = durq.App(filled_pg_url)
    try:
        with app.driver.transaction() as ex:
            held = app.driver.job_claim(
                ex, queue="default", worker_id="plan-check", limit=100, lease_seconds=30
            )
        assert len(held) == 100
        reqs = [
            FinishRequest(j.id, j.claim_version, "plan-check", states.complete(), 0) for j in held
        ]
        batch = PostgresDriver.finish_many_params(reqs)["batch"]
        pyformat = app.driver.queries.pyformat["job_finish_many"]
        assert set(re.findall(r"%\((\w+)\)s", pyformat)) == {"batch"}
        statement = pyformat.replace("%(batch)s", "$1").replace("%%", "%")
        with psycopg.connect(filled_pg_url, row_factory=dict_row) as conn:
            conn.execute(SQL("SET plan_cache_mode = {}").format(Literal(f"force_{plan_mode}_plan")))
            conn.execute(SQL("PREPARE finish(text) AS {}").format(SQL(statement)))
            row = conn.execute(
                SQL("EXPLAIN (FORMAT JSON) EXECUTE finish({})").format(Literal(batch))
            ).fetchone()
            conn.rollback()
    finally:
        app.close()
    assert row is not None
    plan = row["QUERY PLAN"]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    nodes = _nodes(plan[0]["Plan"])
    on_jobs = {
        (n["Node Type"], n.get("Index Name"))
        for n in nodes
        if n.get("Relation Name") == "durq_jobs" or n.get("Index Name", "").startswith("durq_jobs")
    }
    assert ("Seq Scan", None) not in on_jobs, f"the finish scans durq_jobs: {on_jobs}"
    indexes = {index for _, index in on_jobs if index}
    assert indexes == {"durq_jobs_pkey"}, f"the finish reads durq_jobs through {indexes}"
    for node in nodes:  # the request must be read once, not once per job
        if node["Node Type"] == "Nested Loop":
            inner = [c for c in node["Plans"] if c.get("Parent Relationship") == "Inner"]
            assert all(c["Node Type"] not in ("Function Scan", "CTE Scan") for c in inner), (
                "the finish re-reads its request for every job (a nested loop over it)"
            )


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
@pytest.mark.parametrize("statement", ["job_claim", "job_claim_keyed"])
def test_sqlite_claim_reads_its_ready_index_in_order_without_a_sort(
    tmp_path: Path, statement: str, analyzed: bool
) -> None:
    """SQLite's planner, left to itself, took the dashboard's ``durq_jobs_waiting_idx``
    (queue, run_at) and sorted every waiting job of the queue on each claim."""
    app = durq.App(f"sqlite:///{tmp_path / 'plan.db'}")
    try:
        app.migrate()
        app.enqueue_many([("plan.check", {"n": n}) for n in range(READY_ROWS)], return_jobs=False)
        sql = app.driver.queries.named[statement]
        params = dict.fromkeys(re.findall(r":(\w+)", sql), "default") | {
            "limit": 100,
            "now": time.time(),
            "lease_seconds": 30.0,
        }
        conn = sqlite3.connect(tmp_path / "plan.db")
        try:
            if analyzed:
                conn.execute("ANALYZE")
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        finally:
            conn.close()
    finally:
        app.close()
    index = "durq_jobs_ready_idx" if statement == "job_claim" else "durq_jobs_limited_idx"
    assert any(f"USING INDEX {index}" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), f"the claim sorts: {plan}"
