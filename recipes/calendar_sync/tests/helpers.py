"""Helpers for the recipe's tests: log in, schedule, and move a job's clock forward."""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from httpx import Response

from recipes.calendar_sync.config import DEV_ADMIN_PASSWORD

ADMIN = ("admin@example.com", DEV_ADMIN_PASSWORD)


def login(client: TestClient, email: str = ADMIN[0], password: str = ADMIN[1]) -> str:
    """Log in; the client keeps the session cookie. Returns the CSRF token."""
    response = client.post("/auth/session", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    token: str = response.json()["csrfToken"]
    return token


def body(pair_id: str | None = None, hour: int = 9, **extra: Any) -> dict[str, Any]:
    """The seed's example request for one hour of 2025-09-22."""
    return {
        "pairId": pair_id or str(uuid.uuid4()),
        "window": {
            "start": f"2025-09-22T{hour:02d}:00:00Z",
            "end": f"2025-09-22T{hour + 1:02d}:00:00Z",
        },
        "priority": 0,
        "payload": {"reason": "manual_test"},
        **extra,
    }


def schedule(
    client: TestClient, csrf: str | None, payload: Any, *, key: str | None = None
) -> Response:
    headers = {}
    if csrf is not None:
        headers["X-CSRF-Token"] = csrf
    if key is not None:
        headers["Idempotency-Key"] = key
    response: Response = client.post("/jobs/schedule", json=payload, headers=headers)
    return response


def _execute(db_url: str, pg_sql: str, sqlite_sql: str, params: tuple[Any, ...]) -> None:
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url, autocommit=True) as pg:
            pg.execute(pg_sql.encode(), params)
        return
    lite = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    try:
        with lite:  # commits
            lite.execute(sqlite_sql, params)
    finally:
        lite.close()


def make_due(db_url: str, job_id: int) -> None:
    """Time passes for one waiting job: its next run is now (instead of minutes away)."""
    _execute(
        db_url,
        "UPDATE durq_jobs SET run_at = now() WHERE id = %s",
        "UPDATE durq_jobs SET run_at = ? WHERE id = ?",
        (job_id,) if db_url.startswith("postgresql") else (time.time(), job_id),
    )


def pass_time(db_url: str, key: str, seconds: float) -> None:
    """``seconds`` pass for one breaker key: its pause and its parked jobs move closer."""
    _execute(
        db_url,
        "UPDATE durq_breakers SET paused_until = paused_until - make_interval(secs => %s), "
        "held_until = held_until - make_interval(secs => %s) WHERE key = %s",
        "UPDATE durq_breakers SET paused_until = paused_until - ?, "
        "held_until = held_until - ? WHERE key = ?",
        (seconds, seconds, key),
    )
    _execute(
        db_url,
        "UPDATE durq_jobs SET run_at = run_at - make_interval(secs => %s) "
        "WHERE breaker_key = %s AND state IN ('queued', 'retry_wait')",
        "UPDATE durq_jobs SET run_at = run_at - ? "
        "WHERE breaker_key = ? AND state IN ('queued', 'retry_wait')",
        (seconds, key),
    )
