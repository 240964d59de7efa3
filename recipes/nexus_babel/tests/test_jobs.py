"""US-INFRA-04…08 and the seed's job tests, through the HTTP API on both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from tests.waiting import wait_until

from recipes.nexus_babel import Settings
from recipes.nexus_babel.db import Document
from recipes.nexus_babel.jobs import ARTIFACT_TYPES, JOB_TYPES, QUEUE
from recipes.nexus_babel.tests.helpers import headers, submit
from recipes.nexus_babel.worker import run_worker

INGEST = {"paths": ["genesis_babel.txt", "sonnet_18.txt"]}


def _job(client: TestClient, job_id: str) -> dict:  # type: ignore[type-arg]
    response = client.get(f"/api/v1/jobs/{job_id}", headers=headers("viewer"))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def test_async_job_lifecycle_and_artifacts(client: TestClient, settings: Settings) -> None:
    submitted = submit(client, "ingest_batch", INGEST, execution_mode="async")
    assert submitted["status"] == "queued" and submitted["job_id"]
    assert _job(client, submitted["job_id"])["status"] == "queued"

    assert run_worker(settings, once=True) == 1  # the real worker loop, in this process

    job = _job(client, submitted["job_id"])
    assert job["status"] == "succeeded"
    assert job["result"]["files"] == 2
    [attempt] = job["attempts"]
    assert attempt["attempt_number"] == 1 and attempt["status"] == "succeeded"
    assert attempt["runtime_ms"] is not None and attempt["finished_at"] >= attempt["started_at"]
    [artifact] = job["artifacts"]
    assert artifact["artifact_type"] == "ingest_batch_result"
    assert artifact["artifact_payload"] == job["result"]
    docs = client.get("/api/v1/documents", headers=headers("viewer")).json()
    assert [d["path"] for d in docs["documents"]] == ["genesis_babel.txt", "sonnet_18.txt"]


def test_us_infra_04_async_flag_sync_mode_and_listing(
    make_client: Callable[..., TestClient],
) -> None:
    off = make_client(async_jobs_enabled=False)
    response = off.post(
        "/api/v1/jobs/submit",
        headers=headers("operator"),
        json={"job_type": "integrity_audit", "execution_mode": "async"},
    )
    assert response.status_code == 400
    assert response.json()["detail"] == "Async jobs are disabled by feature flag"

    # sync still works with async off, and answers with the final status
    done = submit(off, "ingest_batch", INGEST, execution_mode="sync")
    assert done["status"] == "succeeded" and done["result"]["files"] == 2
    ids = [done["job_id"]]
    ids.append(submit(off, "integrity_audit", execution_mode="sync")["job_id"])
    ids.append(submit(off, "analyze", {"path": "sonnet_18.txt"}, execution_mode="sync")["job_id"])
    listed = off.get("/api/v1/jobs", headers=headers("viewer")).json()
    assert [j["job_id"] for j in listed["jobs"]] == ids[::-1]  # newest first
    assert all(j["status"] == "succeeded" for j in listed["jobs"])


def test_job_idempotency_returns_same_job(client: TestClient) -> None:
    first = submit(client, "ingest_batch", INGEST, idempotency_key="nightly-1")
    again = submit(client, "ingest_batch", INGEST, idempotency_key="nightly-1")
    assert again["job_id"] == first["job_id"] and again["idempotent_replay"] is True
    listed = client.get("/api/v1/jobs", headers=headers("viewer")).json()["jobs"]
    assert len(listed) == 1


def test_us_infra_05_idempotency_is_per_job_type(client: TestClient) -> None:
    audit = submit(client, "integrity_audit", idempotency_key="shared-key")
    ingest = submit(client, "ingest_batch", INGEST, idempotency_key="shared-key")
    assert audit["job_id"] != ingest["job_id"]  # EC-04: (job_type, key) is the identity
    # the seed's unique constraint: a repeated key returns the first job, whatever payload
    other = submit(
        client, "ingest_batch", {"paths": ["odyssey_opening.txt"]}, idempotency_key="shared-key"
    )
    assert other["job_id"] == ingest["job_id"]
    assert _job(client, other["job_id"])["payload"] == INGEST


def test_job_cancel(client: TestClient) -> None:
    job = submit(client, "ingest_batch", INGEST)
    response = client.post(f"/api/v1/jobs/{job['job_id']}/cancel", headers=headers("operator"))
    assert response.status_code == 200
    cancelled = response.json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["lease_owner"] is None and cancelled["lease_expires_at"] is None
    # EC-08: cancelling again is a no-op
    again = client.post(f"/api/v1/jobs/{job['job_id']}/cancel", headers=headers("operator"))
    assert (
        again.json()["status"] == "cancelled"
        and again.json()["updated_at"] == cancelled["updated_at"]
    )


def test_us_infra_06_cancel_of_a_finished_job_is_a_noop(client: TestClient) -> None:
    done = submit(client, "integrity_audit", execution_mode="sync")
    failed = submit(client, "ingest_batch", {"paths": ["../outside.txt"]}, execution_mode="sync")
    assert (done["status"], failed["status"]) == ("succeeded", "failed")
    for job in (done, failed):
        before = _job(client, job["job_id"])
        response = client.post(f"/api/v1/jobs/{job['job_id']}/cancel", headers=headers("operator"))
        assert response.json()["status"] == before["status"]
        assert response.json()["updated_at"] == before["updated_at"]
    missing = client.post("/api/v1/jobs/999999/cancel", headers=headers("operator"))
    assert missing.status_code == 404


def test_us_infra_07_retry_backoff_exact(client: TestClient) -> None:
    queue_app = client.app.state.queue_app  # type: ignore[attr-defined]
    # the schedule itself: RETRY_BACKOFF_SECONDS[min(N-1, 2)]
    policy = queue_app.tasks["ingest_batch"].retry
    assert [policy.delay_for(n) for n in range(1, 6)] == [2, 10, 30, 30, 30]

    missing = {"paths": ["arrives_later.txt"]}  # a file not there yet: a transient error
    three = submit(client, "ingest_batch", missing, execution_mode="sync")
    two = submit(client, "ingest_batch", missing, execution_mode="sync", max_attempts=2)
    one = submit(client, "ingest_batch", missing, execution_mode="sync", max_attempts=1)
    assert one["status"] == "failed"  # EC-05: max_attempts=1 never waits to retry
    assert _job(client, one["job_id"])["attempt_count"] == 1

    for job in (three, two):
        assert job["status"] == "retry_wait"
        view = _job(client, job["job_id"])
        [attempt] = view["attempts"]
        assert attempt["status"] == "failed" and "arrives_later.txt" in attempt["error_text"]
        assert (
            attempt["runtime_ms"] is not None and attempt["started_at"] and attempt["finished_at"]
        )
        delay = (_ts(view["next_run_at"]) - _ts(attempt["finished_at"])).total_seconds()
        assert 2.0 <= delay < 2.5, delay

    def second_attempts_ran() -> bool:
        # the claim only takes jobs whose next_run_at has come: nothing runs early
        queue_app.work(queues=[QUEUE], limit=1)
        return all(_job(client, j["job_id"])["attempt_count"] == 2 for j in (three, two))

    wait_until(second_attempts_ran, timeout=10, what="both second attempts")
    for job in (three, two):
        first, second = _job(client, job["job_id"])["attempts"][:2]
        waited = (_ts(second["started_at"]) - _ts(first["finished_at"])).total_seconds()
        assert waited >= 1.95, waited  # the 2 s backoff, give or take the clock's grain
    view = _job(client, three["job_id"])
    assert view["status"] == "retry_wait" and view["attempt_count"] == 2
    delay = (_ts(view["next_run_at"]) - _ts(view["attempts"][-1]["finished_at"])).total_seconds()
    assert 10.0 <= delay < 10.5, delay
    final = _job(client, two["job_id"])  # attempt N == max_attempts: failed for good
    assert (
        final["status"] == "failed" and [a["status"] for a in final["attempts"]] == ["failed"] * 2
    )


def test_us_infra_08_dispatch_and_typed_artifacts(client: TestClient, corpus: Path) -> None:
    empty = submit(client, "integrity_audit", execution_mode="sync")
    assert empty["result"] == {"document_count": 0, "inconsistencies": []}  # EC-07

    ids = {
        "ingest_batch": submit(client, "ingest_batch", INGEST, execution_mode="sync"),
        "analyze": submit(client, "analyze", {"path": "genesis_babel.txt"}, execution_mode="sync"),
        "branch_replay": submit(
            client, "branch_replay", {"branch": "babel_modern"}, execution_mode="sync"
        ),
        "integrity_audit": submit(client, "integrity_audit", execution_mode="sync"),
    }
    for job_type, job in ids.items():
        view = _job(client, job["job_id"])
        assert view["status"] == "succeeded", (job_type, view["error_text"])
        assert [a["artifact_type"] for a in view["artifacts"]] == [ARTIFACT_TYPES[job_type]]
    analyze = _job(client, ids["analyze"]["job_id"])["result"]
    assert set(analyze["layers"]) == {"lexical", "structural", "stylistic"}
    assert analyze["layers"]["structural"]["output"]["lines"] == 9
    replay = _job(client, ids["branch_replay"]["job_id"])["result"]
    assert replay["event_count"] == 5 and replay["final_sha256"] != replay["base_sha256"]
    assert _job(client, ids["integrity_audit"]["job_id"])["result"]["inconsistencies"] == []

    # the audit re-derives what was stored: a tampered text is reported
    db = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session, session.begin():
        session.execute(update(Document).where(Document.path == "sonnet_18.txt").values(text="x"))
    found = submit(client, "integrity_audit", execution_mode="sync")["result"]["inconsistencies"]
    assert {i["field"] for i in found} == {"sha256", "line_count", "word_count"}

    # unsupported type: 422 over HTTP, ValueError from the service
    response = client.post(
        "/api/v1/jobs/submit", headers=headers("operator"), json={"job_type": "translate"}
    )
    assert response.status_code == 422
    service = client.app.state.job_service  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="Unsupported job type"):
        service.submit("translate", {})
    with pytest.raises(ValueError, match="Unsupported job type"):
        service.dispatch("translate", {}, lambda: False)
    assert set(JOB_TYPES) == set(ARTIFACT_TYPES)


def test_us_infra_19_filters_and_cursor_pagination(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    made = [submit(client, "integrity_audit")["job_id"] for _ in range(5)]
    done = submit(client, "integrity_audit", execution_mode="sync")["job_id"]
    admin = client.post(
        "/api/v1/jobs/submit",
        headers=headers("admin"),
        json={"job_type": "analyze", "payload": {"path": "nope.txt"}},
    )
    assert admin.status_code == 200
    viewer = headers("viewer")

    def page(**params: object) -> dict:  # type: ignore[type-arg]
        return client.get("/api/v1/jobs", headers=viewer, params=params).json()  # type: ignore[no-any-return]

    assert [j["job_id"] for j in page(status="succeeded")["jobs"]] == [done]
    assert {j["job_type"] for j in page(job_type="analyze")["jobs"]} == {"analyze"}
    assert [j["created_by"] for j in page(created_by="dev-admin")["jobs"]] == ["dev-admin"]
    seen, cursor = [], None
    while True:
        body = page(job_type="integrity_audit", limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [j["job_id"] for j in body["jobs"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == [done, *made[::-1]]
    now = datetime.now().astimezone()
    assert page(created_after=(now + timedelta(hours=1)).isoformat())["jobs"] == []
    assert len(page(created_before=(now + timedelta(hours=1)).isoformat())["jobs"]) == 7
    assert (
        client.get("/api/v1/jobs", headers=viewer, params={"status": "exploded"}).status_code == 422
    )
