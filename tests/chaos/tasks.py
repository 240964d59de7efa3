"""The App the chaos workers run (``--app tests.chaos.tasks:app``): one task that records
each execution in a side table, on a connection of its own, before it returns.

A row there is an execution that really ran; comparing those rows with durq's attempt
records is how the chaos run finds lost jobs, double completions and unexplained extra
executions. The row is written in autocommit: it stays even if the attempt is then killed.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg

import durq

SIDE_TABLE = """
CREATE TABLE IF NOT EXISTS chaos_runs (
    job_id         BIGINT NOT NULL,
    claim_version  BIGINT NOT NULL,
    attempt        INTEGER NOT NULL,
    pid            INTEGER NOT NULL,
    at             TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
)
"""

app = durq.App()
_local = threading.local()


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        url = os.environ["DURQ_DATABASE_URL"]
        conn = _local.conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    return conn


# Many attempts and no wait: an attempt that meets the database away fails and is tried
# again; the chaos run checks each job ends succeeded once, however many tries it took.
@app.task(retry=durq.Fixed([0.05]), max_attempts=1000, pass_context=True)
def record(ctx: durq.JobContext, n: int) -> dict[str, int]:
    try:
        _connection().execute(
            "INSERT INTO chaos_runs (job_id, claim_version, attempt, pid) VALUES (%s, %s, %s, %s)",
            (ctx.job.id, ctx.job.claim_version, ctx.job.attempt, os.getpid()),
        )
    except psycopg.Error:
        _local.conn = None
        raise
    return {"n": n}
