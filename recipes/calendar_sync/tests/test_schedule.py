"""Seed 004 "API scheduling" and "Idempotency": POST /jobs/schedule, on both backends."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recipes.calendar_sync import CalendarSync, FakeProvider
from recipes.calendar_sync.service import QUEUE

from .conftest import VIEWER, sync_of
from .helpers import body, login, schedule


def _count(client: TestClient) -> int:
    return len(sync_of(client).jobs(limit=1000))


def test_schedule_valid_payload_returns_202_and_inserts_jobs(client: TestClient) -> None:
    csrf = login(client)
    pair, connector = str(uuid.uuid4()), str(uuid.uuid4())
    request = body(pair, connectorId=connector, priority=3, payload={"reason": "manual_test"})
    response = schedule(client, csrf, request)
    assert response.status_code == 202, response.text
    (job_id,) = response.json()["jobIds"]

    job = sync_of(client).job(job_id)
    assert (job.pair_id, job.connector_id, job.status) == (pair, connector, "pending")
    assert job.window_start == "2025-09-22T09:00:00+00:00"
    assert job.window_end == "2025-09-22T10:00:00+00:00"
    assert (job.priority, job.payload) == (3, {"reason": "manual_test"})
    assert (job.retry_count, job.max_retries, job.last_error) == (0, 5, None)
    assert job.next_run_at is not None and job.next_run_at <= datetime.now(UTC)
    durq_job = sync_of(client).app.get_job(job_id)
    assert (durq_job.queue, durq_job.breaker_key) == (QUEUE, f"{connector}:{pair}")

    # Optional fields: the default connector, priority 0, an empty payload; a window of
    # three days is three jobs, one per day.
    minimal = {
        "pairId": pair,
        "window": {"start": "2025-09-22T00:00:00Z", "end": "2025-09-25T00:00:00Z"},
    }
    response = schedule(client, csrf, minimal)
    assert response.status_code == 202, response.text
    jobs = response.json()["jobs"]
    assert len(jobs) == 3 and len(set(response.json()["jobIds"])) == 3
    assert [j["window"]["start"][:10] for j in jobs] == ["2025-09-22", "2025-09-23", "2025-09-24"]
    default_connector = str(sync_of(client).settings.default_connector_id)
    assert {(j["connectorId"], j["priority"], j["status"]) for j in jobs} == {
        (default_connector, 0, "pending")
    }
    assert all(j["payload"] == {} for j in jobs)
    assert _count(client) == 4


BAD_BODIES: list[tuple[str, Any]] = [
    ("not JSON", None),
    ("a JSON array", ["pairId"]),
    ("an unknown top-level key", body(str(uuid.uuid4()), extra="x")),
    ("an unknown key in window", body() | {"window": body()["window"] | {"tz": "UTC"}}),
    ("pairId not a UUID", body("pair-1")),
    ("pairId missing", {k: v for k, v in body().items() if k != "pairId"}),
    ("window missing", {k: v for k, v in body().items() if k != "window"}),
    ("window.start not ISO 8601", body() | {"window": {"start": "yesterday", "end": "today"}}),
    (
        "a window without a timezone",
        body() | {"window": {"start": "2025-09-22T09:00:00", "end": "2025-09-22T10:00:00"}},
    ),
    (
        "window.end before start",
        body() | {"window": {"start": "2025-09-22T10:00:00Z", "end": "2025-09-22T09:00:00Z"}},
    ),
    ("connectorId not a UUID", body(connectorId="conn-1")),
    ("priority as a string", body(priority="1")),
    ("priority not an integer", body(priority=1.5)),
    ("payload not an object", body(payload=["a"])),
]


def test_schedule_malformed_or_unknown_keys_returns_400(client: TestClient) -> None:
    csrf = login(client)
    headers = {"X-CSRF-Token": csrf, "Content-Type": "application/json"}
    for what, payload in BAD_BODIES:
        if payload is None:
            response = client.post("/jobs/schedule", content=b'{"pairId": ', headers=headers)
        else:
            response = schedule(client, csrf, payload)
        assert response.status_code == 400, (what, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_request", what
    unknown = schedule(client, csrf, body(extra="x")).json()["error"]["details"]
    assert any(d["field"] == "extra" for d in unknown), unknown
    assert _count(client) == 0, "no bad request inserts anything"


def test_schedule_requires_admin_session(
    client: TestClient, make_client: Callable[..., TestClient]
) -> None:
    # No session at all.
    assert schedule(client, None, body()).status_code == 401
    # Wrong credentials get no session.
    refused = client.post("/auth/session", json={"email": "admin@example.com", "password": "x"})
    assert refused.status_code == 401 and "syn_session" not in refused.cookies
    # A forged or tampered cookie is no session.
    client.cookies.set("syn_session", "eyJlbWFpbCI6ImFkbWluIn0.forged")
    assert schedule(client, "x", body()).status_code == 401
    client.cookies.clear()

    # A viewer has a session but is not an admin.
    viewer_csrf = login(client, *VIEWER)
    assert schedule(client, viewer_csrf, body()).status_code == 403
    client.cookies.clear()

    # An admin session: HttpOnly cookie; without the CSRF token (or with another) refused.
    response = client.post(
        "/auth/session", json={"email": "admin@example.com", "password": login_password()}
    )
    set_cookie = response.headers.get_list("set-cookie")
    session_cookie = next(c for c in set_cookie if c.startswith("syn_session="))
    assert "HttpOnly" in session_cookie and "SameSite=strict" in session_cookie
    csrf = response.json()["csrfToken"]
    assert schedule(client, None, body()).status_code == 403
    assert schedule(client, csrf[::-1], body()).status_code == 403
    # The CSRF token of another admin session does not fit this one.
    other = make_client()
    other_csrf = login(other)
    assert schedule(client, other_csrf, body()).status_code == 403
    assert _count(client) == 0
    assert schedule(client, csrf, body()).status_code == 202


def login_password() -> str:
    from .helpers import ADMIN

    return ADMIN[1]


def test_schedule_idempotency_key_no_duplicate(client: TestClient) -> None:
    csrf = login(client)
    request = body(str(uuid.uuid4()))
    first = schedule(client, csrf, request, key="sched-42")
    again = schedule(client, csrf, request, key="sched-42")
    assert first.status_code == again.status_code == 202
    assert first.json()["jobIds"] == again.json()["jobIds"]
    assert _count(client) == 1, "a repeated Idempotency-Key inserts nothing"

    other_key = schedule(client, csrf, request, key="sched-43")
    assert other_key.status_code == 202 and other_key.json()["jobIds"] != first.json()["jobIds"]
    conflict = schedule(client, csrf, body(str(uuid.uuid4())), key="sched-42")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "idempotency_conflict"
    assert schedule(client, csrf, request, key="bad key!").status_code == 400
    assert _count(client) == 2


def _pause_pair(sync: CalendarSync, provider: FakeProvider, pair: str) -> None:
    """Five consecutive failures of one pair's syncs (five windows, each failing once)."""
    provider.fail_pair(pair)
    for hour in range(5):
        schedule_direct(sync, pair, hour)
    ran = sync.app.work(queues=[QUEUE], batch=1)
    assert [sync.job(j.id).status for j in ran] == ["retrying"] * 5


def schedule_direct(sync: CalendarSync, pair: str, hour: int) -> None:
    from recipes.calendar_sync import ScheduleRequest

    sync.schedule(
        ScheduleRequest(
            pair_id=uuid.UUID(pair),
            window_start=datetime(2025, 9, 22, hour, tzinfo=UTC),
            window_end=datetime(2025, 9, 22, hour + 1, tzinfo=UTC),
        )
    )


def test_schedule_paused_pair_returns_409_with_alert(
    client: TestClient, provider: FakeProvider
) -> None:
    sync = sync_of(client)
    pair = str(uuid.uuid4())
    _pause_pair(sync, provider, pair)
    before = _count(client)

    csrf = login(client)
    response = schedule(client, csrf, body(pair))
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    connector = str(sync.settings.default_connector_id)
    assert (error["code"], error["pairId"], error["connectorId"]) == (
        "pair_paused",
        pair,
        connector,
    )
    assert error["pausedUntil"] is not None
    alert = error["alert"]
    assert (alert["category"], alert["severity"], alert["state"]) == (
        "sync_circuit_breaker",
        "warning",
        "open",
    )
    assert (alert["pairId"], alert["connectorId"]) == (pair, connector)
    assert alert["context"]["consecutive_failures"] == 5
    assert _count(client) == before, "a paused pair's schedule inserts nothing"
    # Another pair is not affected.
    assert schedule(client, csrf, body(str(uuid.uuid4()))).status_code == 202


@pytest.mark.parametrize("state", ["open", "all"])
def test_alerts_and_stats_endpoints_speak_the_seeds_words(
    client: TestClient, provider: FakeProvider, state: str
) -> None:
    sync = sync_of(client)
    pair = str(uuid.uuid4())
    _pause_pair(sync, provider, pair)
    login(client)
    (alert,) = client.get("/alerts", params={"state": state}).json()["alerts"]
    assert alert["category"] == "sync_circuit_breaker" and alert["pairId"] == pair
    (stats,) = client.get("/connector-failure-stats").json()["stats"]
    assert (stats["pairId"], stats["consecutiveFailures"], stats["state"]) == (pair, 5, "open")


def test_job_reads_show_status_and_run_logs(client: TestClient) -> None:
    csrf = login(client)
    (job_id,) = schedule(client, csrf, body()).json()["jobIds"]
    sync = sync_of(client)
    sync.app.work(queues=[QUEUE])
    shown = client.get(f"/jobs/{job_id}").json()
    assert shown["job"]["status"] == "completed" and shown["job"]["nextRunAt"] is None
    (entry,) = shown["logs"]
    assert (entry["outcome"], entry["processedEvents"], entry["failedEvents"]) == (
        "succeeded",
        4,
        0,
    )
    assert [
        j["id"] for j in client.get("/jobs", params={"status": "completed"}).json()["jobs"]
    ] == [job_id]
    assert client.get("/jobs", params={"status": "pending"}).json()["jobs"] == []
    assert client.get("/jobs", params={"status": "done"}).status_code == 400
    other = sync.app.enqueue("elsewhere", {}, unchecked=True)
    assert client.get(f"/jobs/{other.id}").status_code == 404
    client.cookies.clear()
    assert client.get(f"/jobs/{job_id}").status_code == 401
