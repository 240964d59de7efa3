"""Enqueue → claim → outcome, on both backends: states, attempts, results, artifacts."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import pytest

import durq
from durq import testing
from durq._engine import jobs as engine
from durq.errors import InvalidStage, LeaseLost


def test_enqueue_sets_defaults_and_options(app: durq.App) -> None:
    @app.task(queue="images", retry=durq.Fixed([60, 300]), max_attempts=5, priority=3)
    def resize(image_id: int) -> dict[str, int]:
        return {"image_id": image_id}

    job = resize.enqueue(image_id=7)
    assert (job.queue, job.task, job.args, job.state) == (
        "images",
        "resize",
        {"image_id": 7},
        "queued",
    )
    assert (job.attempt, job.max_attempts, job.priority, job.claim_version) == (0, 5, 3, 0)
    assert job.retry_policy == {"kind": "fixed", "delays": [60, 300]}

    later = datetime.now(UTC) + timedelta(hours=1)
    other = app.enqueue(
        "resize", {"image_id": 8}, queue="slow", priority=-1, run_at=later, max_attempts=2
    )
    assert (other.queue, other.priority, other.max_attempts) == ("slow", -1, 2)
    assert abs((other.run_at - later).total_seconds()) < 0.001
    delayed = resize.enqueue_with({"image_id": 9}, delay=30)
    assert 29 <= (delayed.run_at - delayed.created_at).total_seconds() <= 31
    assert app.get_job(job.id) == job


def test_success_records_result_attempt_and_artifacts(app: durq.App) -> None:
    @app.task(pass_context=True)
    def ingest_batch(ctx: durq.JobContext, n: int) -> dict[str, int]:
        ctx.add_artifact("ingest_batch_result", {"rows": n}, ref=f"s3://bucket/{n}")
        return {"rows": n}

    job = testing.run_inline(app, ingest_batch, {"n": 3})
    assert job.state == "succeeded"
    assert job.result == {"rows": 3}
    assert job.finished_at is not None and job.attempt == 1
    (attempt,) = app.attempts(job.id)
    assert (attempt.attempt, attempt.outcome, attempt.claim_version) == (1, "succeeded", 1)
    assert attempt.worker_id and attempt.started_at and attempt.runtime_ms is not None
    assert attempt.started_at <= attempt.finished_at
    (artifact,) = app.artifacts(job.id)
    assert (artifact.artifact_type, artifact.payload, artifact.ref) == (
        "ingest_batch_result",
        {"rows": 3},
        "s3://bucket/3",
    )


def test_failure_retries_then_dead_letters_with_error_recorded(app: durq.App) -> None:
    @app.task(retry=durq.Fixed([0]), max_attempts=2)
    def flaky() -> None:
        raise ConnectionError("upstream down")

    job = testing.run_inline(app, flaky)
    assert (job.state, job.attempt, job.last_error_code, job.last_error) == (
        "retry_wait",
        1,
        "ConnectionError",
        "upstream down",
    )
    job = app.run_job(job.id)
    assert (job.state, job.attempt) == ("dead_letter", 2)
    assert job.finished_at is not None
    outcomes = [(a.attempt, a.outcome, a.error_code) for a in app.attempts(job.id)]
    assert outcomes == [(1, "failed", "ConnectionError"), (2, "failed", "ConnectionError")]


def test_task_signals_fail_snooze_retry_and_classifier(app: durq.App) -> None:
    @app.task(max_attempts=5)
    def invalid_tuple() -> None:
        raise durq.Fail("invalid_tuple", "source library is a default library")

    @app.task(max_attempts=5)
    def snoozer() -> None:
        raise durq.Snooze(120)

    @app.task(max_attempts=5, retry=durq.Fixed([1]))
    def rate_limited() -> None:
        raise durq.Retry(after=90, code="http_429")

    class AuthError(Exception):
        pass

    def classify(exc: BaseException) -> durq.retry.TaskSignal | None:
        return durq.Fail("auth", str(exc)) if isinstance(exc, AuthError) else None

    @app.task(max_attempts=5, classifier=classify)
    def needs_auth() -> None:
        raise AuthError("401 from storage")

    failed = testing.run_inline(app, invalid_tuple)
    assert (failed.state, failed.last_error_code, failed.attempt) == (
        "dead_letter",
        "invalid_tuple",
        1,
    )

    snoozed = testing.run_inline(app, snoozer)
    assert (snoozed.state, snoozed.attempt) == ("queued", 0)  # no attempt used
    (rec,) = app.attempts(snoozed.id)
    assert rec.outcome == "snoozed"
    assert 119 <= (snoozed.run_at - rec.finished_at).total_seconds() <= 120.001

    retried = testing.run_inline(app, rate_limited)
    (rec,) = app.attempts(retried.id)
    assert (retried.state, retried.last_error_code) == ("retry_wait", "http_429")
    assert abs((retried.run_at - rec.finished_at).total_seconds() - 90) < 0.001

    classified = testing.run_inline(app, needs_auth)
    assert (classified.state, classified.last_error_code) == ("dead_letter", "auth")


def test_timeout_and_non_json_result_are_recorded_and_handled(app: durq.App) -> None:
    release = threading.Event()

    @app.task(timeout=0.2, max_attempts=1)
    def slow_sync() -> None:
        release.wait(10)

    @app.task(timeout=0.2, max_attempts=1)
    async def slow_async() -> None:
        await asyncio.sleep(10)

    @app.task(max_attempts=3)
    def returns_object() -> object:
        return object()

    try:
        job = testing.run_inline(app, slow_sync)
        assert job.state == "dead_letter" and job.last_error_code == "JobTimeout"
        assert "timeout of 0.2s" in (job.last_error or "")
    finally:
        release.set()
    job = testing.run_inline(app, slow_async)
    assert job.state == "dead_letter" and job.last_error_code == "JobTimeout"
    job = testing.run_inline(app, returns_object)
    assert job.state == "dead_letter" and job.last_error_code == "result_not_json"
    assert "not JSON-serialisable" in (job.last_error or "")


def test_async_task_runs(app: durq.App) -> None:
    @app.task
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    assert testing.run_inline(app, double, {"x": 21}).result == 42


def test_stages_advance_in_declared_order_only(app: durq.App) -> None:
    seen: list[str | None] = []

    @app.task(stages=("fetching", "processing", "uploading"), pass_context=True, max_attempts=1)
    def transcode(ctx: durq.JobContext, skip: bool) -> str:
        ctx.set_stage("fetching")
        seen.append(app.get_job(ctx.job.id).stage)
        if skip:
            ctx.set_stage("uploading")  # skips processing: refused
        ctx.set_stage("processing")
        ctx.set_stage("uploading")
        seen.append(app.get_job(ctx.job.id).stage)
        return "done"

    ok = testing.run_inline(app, transcode, {"skip": False})
    assert ok.state == "succeeded" and seen == ["fetching", "uploading"]
    assert ok.stage is None  # the stage belongs to a running attempt

    bad = testing.run_inline(app, transcode, {"skip": True})
    assert (bad.state, bad.last_error_code) == ("dead_letter", "InvalidStage")
    assert "fetching → processing → uploading" in (bad.last_error or "")


def test_stage_write_guarded_in_sql_too(app: durq.App) -> None:
    """Even bypassing the task's check, the database refuses an out-of-order stage."""
    app.enqueue("t", {}, unchecked=True)
    with app.driver.transaction() as ex:
        (job,) = app.driver.job_claim(ex, queue="default", worker_id="w", limit=1, lease_seconds=30)
    with app.driver.transaction() as ex:  # the SQL block's guard matches no row
        moved = app.driver.job_set_stage(
            ex,
            job_id=job.id,
            claim_version=job.claim_version,
            stage="processing",
            expected_stage="fetching",
            lease_seconds=30,
        )
    assert moved is None
    with pytest.raises(InvalidStage), app.driver.transaction() as ex:
        engine.set_stage(app.driver, ex, job, "processing", "fetching", 30)
    assert app.get_job(job.id).stage is None


def test_priority_then_run_at_then_id_order(app: durq.App) -> None:
    low = app.enqueue("t", {"n": 1}, priority=5, unchecked=True)
    first = app.enqueue("t", {"n": 2}, priority=0, unchecked=True)
    second = app.enqueue("t", {"n": 3}, priority=0, unchecked=True)
    with app.driver.transaction() as ex:
        claimed = app.driver.job_claim(
            ex, queue="default", worker_id="w", limit=3, lease_seconds=30
        )
    assert [j.id for j in claimed] == [first.id, second.id, low.id]
    assert all(j.state == "running" and j.claim_version == 1 and j.attempt == 1 for j in claimed)
    assert all(j.worker_id == "w" and j.lease_expires_at and j.heartbeat_at for j in claimed)


def test_future_jobs_and_paused_queues_are_not_claimed(app: durq.App) -> None:
    app.enqueue("t", {}, delay=3600, unchecked=True)
    paused = app.enqueue("t", {}, queue="paused", unchecked=True)
    app.pause_queue("paused")

    def claim_all() -> list[durq.Job]:
        with app.driver.transaction() as ex:
            return [
                job
                for queue in ("default", "paused")
                for job in app.driver.job_claim(
                    ex, queue=queue, worker_id="w", limit=10, lease_seconds=30
                )
            ]

    assert claim_all() == []
    app.resume_queue("paused")
    assert [j.id for j in claim_all()] == [paused.id]


def test_heartbeat_extends_lease(app: durq.App) -> None:
    app.enqueue("t", {}, unchecked=True)
    with app.driver.transaction() as ex:
        (job,) = app.driver.job_claim(ex, queue="default", worker_id="w", limit=1, lease_seconds=5)
    with app.driver.transaction() as ex:
        assert app.driver.job_heartbeat(ex, job.id, job.claim_version, 600) is False
    after = app.get_job(job.id)
    assert after.lease_expires_at is not None and job.lease_expires_at is not None
    assert after.lease_expires_at - job.lease_expires_at > timedelta(seconds=500)


def test_cancel_each_state(app: durq.App) -> None:
    queued = app.enqueue("t", {}, unchecked=True)
    assert app.cancel(queued.id).state == "cancelled"
    assert app.cancel(queued.id).state == "cancelled"  # terminal: no-op, current state

    @app.task(max_attempts=3, retry=durq.Fixed([3600]))
    def fails() -> None:
        raise RuntimeError("x")

    waiting = testing.run_inline(app, fails)
    assert waiting.state == "retry_wait"
    assert app.cancel(waiting.id).state == "cancelled"

    running = app.enqueue("t", {}, unchecked=True)
    with app.driver.transaction() as ex:
        (held,) = app.driver.job_claim(
            ex, queue="default", worker_id="w", limit=1, lease_seconds=30
        )
    requested = app.cancel(running.id)
    assert (requested.state, requested.cancel_requested) == ("running", True)
    with app.driver.transaction() as ex:  # the worker learns at its next write
        assert app.driver.job_heartbeat(ex, held.id, held.claim_version, 30) is True
    from durq import states
    from durq._drivers.base import FinishRequest

    req = FinishRequest(held.id, held.claim_version, "w", states.retry(10, "E", "boom"), 5)
    with app.driver.transaction() as ex:
        final = app.driver.job_finish(ex, req)
    assert final is not None  # the worker still held it: its write went through
    assert final.state == "cancelled" and final.finished_at is not None
    assert app.attempts(held.id)[-1].outcome == "cancelled"

    @app.task
    def ok() -> int:
        return 1

    done = testing.run_inline(app, ok)
    assert app.cancel(done.id) == done  # terminal: a no-op reporting the current state
    with pytest.raises(durq.JobNotFound):
        app.cancel(10**9)


def test_cancel_requested_then_success_keeps_the_result(app: durq.App) -> None:
    started, proceed = threading.Event(), threading.Event()

    @app.task
    def work() -> str:
        started.set()
        proceed.wait(10)
        return "done"

    job = work.enqueue()
    runner = threading.Thread(target=app.run_job, args=(job.id,))
    runner.start()
    assert started.wait(10)
    assert app.cancel(job.id).cancel_requested
    proceed.set()
    runner.join(10)
    final = app.get_job(job.id)
    assert (final.state, final.result) == ("succeeded", "done")


def test_requeue_semantics_for_every_state(app: durq.App) -> None:
    @app.task(max_attempts=1)
    def dies() -> None:
        raise RuntimeError("dead")

    @app.task(max_attempts=2, retry=durq.Fixed([3600]))
    def waits() -> None:
        raise RuntimeError("later")

    @app.task
    def ok() -> int:
        return 1

    dead = testing.run_inline(app, dies)
    waiting = testing.run_inline(app, waits)
    succeeded = testing.run_inline(app, ok)
    cancelled = app.cancel(ok.enqueue().id)
    queued = ok.enqueue()
    for job in (dead, waiting, succeeded, cancelled, queued):
        res = app.requeue(job.id)
        assert not res.idempotent
        j = res.job
        assert (j.state, j.attempt, j.last_error_code, j.last_error, j.finished_at) == (
            "queued",
            0,
            None,
            None,
            None,
        ), job.state
        assert j.run_at <= datetime.now(UTC) + timedelta(seconds=1)

    running = ok.enqueue()
    with app.driver.transaction() as ex:
        app.driver.job_claim_id(ex, running.id, worker_id="w", lease_seconds=30)
    res = app.requeue(running.id)
    assert res.idempotent and res.job.state == "running" and res.job.attempt == 1
    with pytest.raises(durq.JobNotFound):
        app.requeue(10**9)


def test_lease_lost_write_changes_nothing(app: durq.App) -> None:
    app.enqueue("t", {}, unchecked=True)
    with app.driver.transaction() as ex:
        (job,) = app.driver.job_claim(ex, queue="default", worker_id="w", limit=1, lease_seconds=30)
    from durq import states
    from durq._drivers.base import FinishRequest

    stale = FinishRequest(job.id, job.claim_version - 1, "w", states.complete(1), 1)
    before = app.get_job(job.id)
    with app.driver.transaction() as ex:
        assert app.driver.job_finish(ex, stale) is None  # the fence matched no row
    with pytest.raises(LeaseLost), app.driver.transaction() as ex:
        engine.finish(app.driver, ex, stale)
    assert app.get_job(job.id) == before
    assert app.attempts(job.id) == []
