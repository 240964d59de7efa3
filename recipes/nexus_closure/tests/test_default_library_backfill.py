"""The backfill worker's state machine on durq, and the internal requeue route (seed 000)."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, event, insert, update
from tests.waiting import wait_until

import durq
from durq import testing
from recipes.nexus_closure import default_library_closure as closure
from recipes.nexus_closure.api import create_app
from recipes.nexus_closure.internal_libraries import REQUEUE_PATH
from recipes.nexus_closure.libraries import add_media_to_library
from recipes.nexus_closure.models import DefaultLibraryBackfillJob, Membership, utcnow
from recipes.nexus_closure.tasks import NexusRuntime

from .conftest import INTERNAL_SECRET
from .faults import database_refuses
from .world import World, backfill_row, edges, library_media, make_media, make_world

TASK = closure.BACKFILL_TASK_NAME


def _world_with_media(runtime: NexusRuntime, count: int = 2) -> tuple[World, set[uuid.UUID]]:
    """A pending backfill for the member, and `count` media already in the shared library
    (added before the member's closure existed, so only the backfill can bring them)."""
    w = make_world(runtime)
    media = {make_media(runtime, w.owner, f"paper {i}") for i in range(count)}
    with runtime.sessions.begin() as session:
        for m in media:
            add_media_to_library(session, w.owner, w.library, m)
        session.execute(
            delete(closure.Edge).where(closure.Edge.default_library_id == w.member_default)
        )
        closure.gc_default_library_media(session, w.member_default, media)
    assert library_media(runtime, w.member_default) == set()
    return w, media


def _set_row(runtime: NexusRuntime, key: closure.BackfillKey, **values: Any) -> None:
    with runtime.sessions.begin() as session:
        session.execute(update(DefaultLibraryBackfillJob).where(key.where()).values(**values))


def _dispatch(runtime: NexusRuntime, key: closure.BackfillKey) -> None:
    assert closure.enqueue_backfill_job(
        key.default_library_id, key.source_library_id, key.user_id, "req-1", app=runtime.app
    )


def _backfill_jobs(runtime: NexusRuntime, key: closure.BackfillKey) -> list[durq.Job]:
    args = {"default_library_id": str(key.default_library_id), "user_id": str(key.user_id)}
    return testing.enqueued_jobs(runtime.app, TASK, args=args)


def test_backfill_worker_claims_pending_and_completes_materialization(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w, media = _world_with_media(runtime)
    _dispatch(runtime, w.member_key)
    assert backfill_row(runtime, w.member_key)["status"] == "pending"  # type: ignore[index]
    (job,) = testing.drain(runtime.app)
    assert job.state == "succeeded" and job.queue == "ingest"
    assert job.result["status"] == "completed" and job.result["edges_inserted"] == len(media)
    row = backfill_row(runtime, w.member_key)
    assert row is not None and row["status"] == "completed" and row["finished_at"] is not None
    expected = {(w.member_default, w.library, m) for m in media}
    assert edges(runtime, default_library_id=w.member_default) == expected
    assert library_media(runtime, w.member_default) == media
    # a second run (operator requeue) inserts nothing new: every insert is idempotent
    assert client.post(REQUEUE_PATH, json=_body(w.member_key)).status_code == 200
    (again,) = testing.drain(runtime.app)
    assert again.result["status"] == "completed" and again.result["edges_inserted"] == 0
    assert edges(runtime, default_library_id=w.member_default) == expected


def test_backfill_worker_noops_when_job_missing_or_not_pending(runtime: NexusRuntime) -> None:
    w, _media = _world_with_media(runtime)
    missing = closure.BackfillKey(w.owner_default, w.library, w.owner)  # no such row
    _dispatch(runtime, missing)
    (job,) = testing.drain(runtime.app)
    assert job.state == "succeeded" and job.result == {"status": "skipped", "reason": "missing"}
    for status in ("running", "completed", "failed"):
        _set_row(runtime, w.member_key, status=status)
        before = backfill_row(runtime, w.member_key)
        _dispatch(runtime, w.member_key)
        (job,) = testing.drain(runtime.app)
        assert job.result == {"status": "skipped", "reason": "not_pending"}
        assert backfill_row(runtime, w.member_key) == before
    assert edges(runtime) == {(w.owner_default, w.library, m) for m in _media}


def test_backfill_worker_complete_and_fail_are_status_guarded(runtime: NexusRuntime) -> None:
    w = make_world(runtime)
    key = w.member_key
    for status in ("pending", "completed", "failed"):
        _set_row(runtime, key, status=status, attempts=2, last_error_code="E_EARLIER")
        before = backfill_row(runtime, key)
        with runtime.sessions.begin() as session:
            assert closure.mark_backfill_job_completed(session, key) is None
            assert closure.mark_backfill_job_failed(session, key, "E_STALE") is None
        assert backfill_row(runtime, key) == before
    # a stale worker cannot clobber the terminal state a newer one wrote
    _set_row(runtime, key, status="running")
    with runtime.sessions.begin() as session:
        completed = closure.mark_backfill_job_completed(session, key)
        assert completed is not None and completed.status == "completed"
        assert closure.mark_backfill_job_failed(session, key, "E_STALE") is None
    row = backfill_row(runtime, key)
    assert row is not None and row["status"] == "completed" and row["attempts"] == 2


def test_backfill_worker_failure_attempt_lt_5_requeues_with_expected_delay(
    runtime: NexusRuntime,
) -> None:
    w, _media = _world_with_media(runtime)
    for attempt in range(1, closure.BACKFILL_MAX_ATTEMPTS):
        _set_row(runtime, w.member_key, status="pending", attempts=attempt - 1)
        _dispatch(runtime, w.member_key)
        with database_refuses(runtime.engine, "default_library_closure_edges", "INSERT"):
            (job,) = testing.drain(runtime.app)
        row = backfill_row(runtime, w.member_key)
        assert row is not None
        assert (row["status"], row["attempts"]) == ("pending", attempt)
        assert row["last_error_code"] is None and row["finished_at"] is None
        # the retry is durq's: the same job waits exactly delay[attempts - 1]
        assert job.state == "retry_wait" and job.last_error_code == "E_MATERIALIZATION_FAILED"
        countdown = (job.run_at - job.updated_at).total_seconds()
        assert countdown == pytest.approx(closure.BACKFILL_RETRY_DELAYS_SECONDS[attempt - 1])
    assert edges(runtime, default_library_id=w.member_default) == set()


def test_backfill_worker_failure_attempt_5_stays_failed_without_requeue(
    runtime: NexusRuntime,
) -> None:
    w, _media = _world_with_media(runtime)
    _set_row(runtime, w.member_key, attempts=closure.BACKFILL_MAX_ATTEMPTS - 1)
    _dispatch(runtime, w.member_key)
    with database_refuses(runtime.engine, "default_library_closure_edges", "INSERT"):
        (job,) = testing.drain(runtime.app)
    row = backfill_row(runtime, w.member_key)
    assert row is not None and row["status"] == "failed" and row["attempts"] == 5
    assert row["last_error_code"] == "E_MATERIALIZATION_FAILED" and row["finished_at"]
    assert job.state == "dead_letter"
    assert _backfill_jobs(runtime, w.member_key) == []  # nothing will run it again


def test_backfill_worker_invalid_tuple_is_terminal_failed_without_retry(
    runtime: NexusRuntime,
) -> None:
    w, _media = _world_with_media(runtime)
    invalid = [
        closure.BackfillKey(w.member_default, w.library, w.owner),  # not the owner's default
        closure.BackfillKey(w.member_default, w.owner_default, w.member),  # default as source
    ]
    for key in invalid:
        with runtime.sessions.begin() as session:
            closure.upsert_backfill_job_pending(session, key)
        _dispatch(runtime, key)
        (job,) = testing.drain(runtime.app)
        row = backfill_row(runtime, key)
        assert row is not None and row["status"] == "failed"
        assert row["last_error_code"] == "E_INVALID_TUPLE"
        assert job.state == "dead_letter" and job.attempt == 1  # no retry
        assert _backfill_jobs(runtime, key) == []
    assert edges(runtime, default_library_id=w.member_default) == set()
    assert library_media(runtime, w.member_default) == set()


def test_backfill_worker_does_not_materialize_when_membership_is_absent(
    runtime: NexusRuntime,
) -> None:
    w, _media = _world_with_media(runtime)
    _dispatch(runtime, w.member_key)
    with runtime.sessions.begin() as session:  # revoked, the durable row left behind
        session.execute(
            delete(Membership).where(
                Membership.library_id == w.library, Membership.user_id == w.member
            )
        )
    (job,) = testing.drain(runtime.app)
    assert job.result["status"] == "completed" and job.result["membership_present"] is False
    row = backfill_row(runtime, w.member_key)
    assert row is not None and row["status"] == "completed"
    assert edges(runtime, default_library_id=w.member_default) == set()
    assert library_media(runtime, w.member_default) == set()


def test_backfill_worker_retry_enqueue_failure_keeps_pending_state(
    make_runtime: Callable[..., NexusRuntime],
) -> None:
    runtime = make_runtime(lease_seconds=1.0)
    w, _media = _world_with_media(runtime)
    _dispatch(runtime, w.member_key)
    with (
        database_refuses(runtime.engine, "default_library_closure_edges", "INSERT"),
        database_refuses(runtime.engine, "durq_jobs", "UPDATE", when_new_state="retry_wait"),
        pytest.raises(Exception, match="fault injected by the test"),
    ):
        testing.drain(runtime.app)  # the retry's dispatch (durq's outcome write) fails
    row = backfill_row(runtime, w.member_key)
    assert row is not None and row["status"] == "pending" and row["attempts"] == 1
    assert row["last_error_code"] is None and row["finished_at"] is None
    # The retry is not lost: the lease expires and durq reschedules on the same schedule.
    reclaimed: list[durq.Job] = []

    def reclaim() -> bool:
        reclaimed.extend(runtime.app.reclaim_expired())
        return bool(reclaimed)

    wait_until(reclaim, timeout=15, what="the job's lease to expire and be reclaimed")
    (job,) = reclaimed
    assert job.state == "retry_wait"
    countdown = (job.run_at - job.updated_at).total_seconds()
    assert countdown == pytest.approx(closure.BACKFILL_RETRY_DELAYS_SECONDS[0])


def _pending_rows(runtime: NexusRuntime, ages: list[float], status: str = "pending") -> None:
    now = utcnow()
    rows = [
        {
            "default_library_id": uuid.uuid4(),
            "source_library_id": uuid.uuid4(),
            "user_id": uuid.uuid4(),
            "status": status,
            "attempts": 0,
            "created_at": now - timedelta(seconds=age),
            "updated_at": now - timedelta(seconds=age),
        }
        for age in ages
    ]
    with runtime.sessions.begin() as session:
        session.execute(insert(DefaultLibraryBackfillJob), rows)


def _health(runtime: NexusRuntime) -> dict[str, Any]:
    with runtime.sessions() as session:
        return closure.get_backfill_backlog_health(session)


def test_backfill_backlog_guardrail_flags_degraded_when_threshold_exceeded(
    runtime: NexusRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    assert _health(runtime) == {
        "pending_count": 0,
        "pending_age_p95_seconds": 0.0,
        "degraded": False,
    }
    _pending_rows(runtime, [5000.0] * 3, status="failed")  # only pending rows count
    ages = [10.0 * i for i in range(1, 101)]  # 10 s … 1000 s: p95 (nearest rank) is 950 s
    _pending_rows(runtime, ages)
    health = _health(runtime)
    assert health["pending_count"] == 100 and health["degraded"] is True
    assert health["pending_age_p95_seconds"] == pytest.approx(
        sorted(ages)[math.ceil(0.95 * len(ages)) - 1], abs=5
    )
    with runtime.sessions.begin() as session:  # young again: below both guardrails
        session.execute(update(DefaultLibraryBackfillJob).values(updated_at=utcnow()))
    assert _health(runtime)["degraded"] is False
    _pending_rows(runtime, [1.0] * (closure.BACKFILL_PENDING_COUNT_GUARDRAIL + 1 - len(ages)))
    health = _health(runtime)
    assert health["pending_count"] == closure.BACKFILL_PENDING_COUNT_GUARDRAIL + 1
    assert health["degraded"] is True and health["pending_age_p95_seconds"] < 900
    # the worker warns with its structured fields while the backlog is degraded
    w, _media = _world_with_media(runtime)
    _dispatch(runtime, w.member_key)
    with caplog.at_level(logging.WARNING, logger="nexus.tasks.backfill"):
        (job,) = testing.drain(runtime.app)
    (warning,) = [r for r in caplog.records if "backlog degraded" in r.getMessage()]
    assert (warning.task_name, warning.task_id, warning.request_id) == (TASK, job.id, "req-1")  # type: ignore[attr-defined]


def test_backfill_backlog_health_is_read_in_one_snapshot_while_rows_go(
    runtime: NexusRuntime,
) -> None:
    """Member removals delete pending rows while a worker reads the backlog's health: the
    count and the p95 come from the same rows (two statements under READ COMMITTED each
    saw their own, and the second found no row when the first had counted them)."""
    if runtime.engine.dialect.name == "sqlite":
        pytest.skip("SQLite sessions begin IMMEDIATE: no removal commits while one reads")
    ages = [10.0 * i for i in range(1, 21)]
    _pending_rows(runtime, ages)
    deleted: list[int] = []

    def delete_after_first_statement(*_: Any) -> None:
        if deleted:
            return
        deleted.append(0)  # before the delete below runs its own statement
        with runtime.engine.begin() as other:
            deleted[0] = other.execute(delete(DefaultLibraryBackfillJob)).rowcount

    event.listen(runtime.engine, "after_cursor_execute", delete_after_first_statement)
    try:
        health = _health(runtime)
    finally:
        event.remove(runtime.engine, "after_cursor_execute", delete_after_first_statement)
    assert deleted == [len(ages)]
    assert health["pending_count"] == len(ages)
    assert health["pending_age_p95_seconds"] == pytest.approx(
        sorted(ages)[math.ceil(0.95 * len(ages)) - 1], abs=5
    )
    assert _health(runtime) == {
        "pending_count": 0,
        "pending_age_p95_seconds": 0.0,
        "degraded": False,
    }


def _body(key: closure.BackfillKey) -> dict[str, str]:
    return {
        "default_library_id": str(key.default_library_id),
        "source_library_id": str(key.source_library_id),
        "user_id": str(key.user_id),
    }


def test_requeue_endpoint_missing_job_returns_404_e_not_found(client: TestClient) -> None:
    key = closure.BackfillKey(uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    response = client.post(REQUEUE_PATH, json=_body(key))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "E_NOT_FOUND"


def test_requeue_endpoint_running_job_returns_200_idempotent_noop(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w = make_world(runtime)
    with runtime.sessions.begin() as session:
        assert closure.claim_backfill_job_pending(session, w.member_key) is not None
    before = backfill_row(runtime, w.member_key)
    response = client.post(REQUEUE_PATH, json=_body(w.member_key))
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["status"] == "running" and data["idempotent"] is True
    assert data["enqueue_dispatched"] is False
    assert backfill_row(runtime, w.member_key) == before
    assert _backfill_jobs(runtime, w.member_key) == []


def test_requeue_endpoint_pending_failed_completed_reset_to_pending_and_enqueue(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w = make_world(runtime)
    for status in ("pending", "failed", "completed"):
        _set_row(
            runtime,
            w.member_key,
            status=status,
            attempts=3,
            last_error_code="E_X",
            finished_at=utcnow(),
        )
        waiting = len(_backfill_jobs(runtime, w.member_key))
        response = client.post(REQUEUE_PATH, json=_body(w.member_key))
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        assert data["idempotent"] is False and data["enqueue_dispatched"] is True
        row = backfill_row(runtime, w.member_key)
        assert row is not None
        assert (row["status"], row["attempts"], row["last_error_code"], row["finished_at"]) == (
            "pending",
            0,
            None,
            None,
        )
        jobs = _backfill_jobs(runtime, w.member_key)
        assert len(jobs) == waiting + 1 and jobs[-1].queue == "ingest"


def test_requeue_endpoint_returns_operator_state_fields(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w = make_world(runtime)
    _set_row(
        runtime,
        w.member_key,
        status="failed",
        attempts=5,
        last_error_code="E_X",
        finished_at=utcnow(),
    )
    response = client.post(REQUEUE_PATH, json=_body(w.member_key))
    assert response.status_code == 200
    data = response.json()["data"]
    fields = {
        "status",
        "attempts",
        "last_error_code",
        "updated_at",
        "finished_at",
        "idempotent",
        "enqueue_dispatched",
    }
    assert fields <= set(data)
    assert {k: data[k] for k in _body(w.member_key)} == _body(w.member_key)
    row = backfill_row(runtime, w.member_key)
    assert row is not None
    assert data["status"] == row["status"] == "pending" and data["attempts"] == 0
    assert data["last_error_code"] is None and data["finished_at"] is None
    assert durq_time(data["updated_at"]) == row["updated_at"]
    assert data["idempotent"] is False and data["enqueue_dispatched"] is True


def durq_time(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def test_requeue_endpoint_enqueue_failure_reports_enqueue_dispatched_false(
    runtime: NexusRuntime, client: TestClient
) -> None:
    w = make_world(runtime)
    _set_row(runtime, w.member_key, status="failed", attempts=5, last_error_code="E_X")
    with database_refuses(runtime.engine, "durq_jobs", "INSERT"):
        response = client.post(REQUEUE_PATH, json=_body(w.member_key))
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "pending" and data["enqueue_dispatched"] is False
    row = backfill_row(runtime, w.member_key)  # committed despite the failed dispatch
    assert row is not None and row["status"] == "pending" and row["attempts"] == 0
    assert _backfill_jobs(runtime, w.member_key) == []


def test_requeue_endpoint_requires_internal_header_when_middleware_enforces_it(
    runtime: NexusRuntime,
) -> None:
    w = make_world(runtime)
    _set_row(runtime, w.member_key, status="failed", attempts=5)
    enforcing = TestClient(
        create_app(runtime, requires_internal_header=True, internal_secret=INTERNAL_SECRET)
    )
    for headers in ({}, {"X-Nexus-Internal": "wrong"}):
        response = enforcing.post(REQUEUE_PATH, json=_body(w.member_key), headers=headers)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "E_INTERNAL_ONLY"
        assert backfill_row(runtime, w.member_key)["status"] == "failed"  # type: ignore[index]
    ok = enforcing.post(
        REQUEUE_PATH, json=_body(w.member_key), headers={"X-Nexus-Internal": INTERNAL_SECRET}
    )
    assert ok.status_code == 200 and ok.json()["data"]["status"] == "pending"
    # the route has no auth of its own (d-011): the middleware policy is the only gate
    open_app = TestClient(create_app(runtime, requires_internal_header=False))
    assert open_app.post(REQUEUE_PATH, json=_body(w.member_key)).status_code == 200


def test_no_public_bff_proxy_for_internal_requeue_route(runtime: NexusRuntime) -> None:
    package = Path(__file__).resolve().parents[1]
    mentions = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "tests" not in path.relative_to(package).parts and REQUEUE_PATH in path.read_text()
    )
    assert mentions == ["internal_libraries.py"]
    app = create_app(runtime, internal_secret=INTERNAL_SECRET)
    paths = app.openapi()["paths"]  # every route the app serves, however it was included
    assert [p for p in paths if "backfill-jobs" in p] == [REQUEUE_PATH]
    assert set(paths[REQUEUE_PATH]) == {"post"}


def test_enqueue_backfill_job_skips_dispatch_in_test_env(
    make_runtime: Callable[..., NexusRuntime],
) -> None:
    runtime = make_runtime(env="test")
    w = make_world(runtime)
    assert (
        closure.enqueue_backfill_job(w.member_default, w.library, w.member, app=runtime.app)
        is False
    )
    assert _backfill_jobs(runtime, w.member_key) == []
