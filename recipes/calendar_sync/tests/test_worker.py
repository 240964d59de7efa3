"""Seed 004 "Worker claim/complete", "Retry path" and "Circuit breaker", on both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from tests.waiting import wait_until

from recipes.calendar_sync import CalendarSync, FakeProvider, ScheduleRequest
from recipes.calendar_sync.domain import breaker_key
from recipes.calendar_sync.service import QUEUE

from .conftest import sync_of
from .helpers import body, login, make_due, pass_time, schedule

ROOT = Path(__file__).resolve().parents[3]


def _request(pair: str, hour: int = 9) -> ScheduleRequest:
    return ScheduleRequest(
        pair_id=uuid.UUID(pair),
        window_start=datetime(2025, 9, 22, hour, tzinfo=UTC),
        window_end=datetime(2025, 9, 22, hour + 1, tzinfo=UTC),
    )


def _worker(db_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "CALSYNC_DATABASE_URL": db_url,
        "CALSYNC_FAKE_SYNC_SECONDS": "0.1",
        "CALSYNC_WORKER_POLL_SECONDS": "0.1",
        "CALSYNC_WORKER_CONCURRENCY": "2",
    }
    with log.open("wb") as err:  # a file, never a pipe nobody reads while it runs
        return subprocess.Popen(
            [sys.executable, "-m", "recipes.calendar_sync.worker"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def test_two_workers_each_job_claimed_once_and_logged(
    make_sync: Callable[..., CalendarSync], db_url: str, tmp_path: Path
) -> None:
    sync = make_sync()
    logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    workers = [_worker(db_url, logs[0]), _worker(db_url, logs[1])]
    try:
        pids = {str(w.pid) for w in workers}

        def both_alive() -> bool:
            alive = [w for w in sync.app.list_workers() if w.status == "alive"]
            return {w.id.rsplit(":", 1)[-1] for w in alive} >= pids

        wait_until(both_alive, timeout=30, what="both worker processes to start")
        jobs = [j for i in range(16) for j in sync.schedule(_request(str(uuid.uuid4()), i % 20))]

        def all_completed() -> bool:
            return all(j.status == "completed" for j in sync.jobs(limit=100))

        wait_until(all_completed, timeout=60, what="every sync job to complete")
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        codes = [w.wait(timeout=30) for w in workers]
    assert codes == [0, 0], [log.read_text()[-2000:] for log in logs]

    claimed_by: dict[str, int] = {}
    for job in jobs:
        (entry,) = sync.logs(job.id)  # exactly one attempt: one claim, by one worker
        assert entry.outcome == "succeeded" and entry.error_summary is None
        assert (entry.processed_events, entry.failed_events) == (4, 0)  # 1 h is 4 events of 15 min
        assert entry.started_at is not None and entry.finished_at >= entry.started_at
        pid = (entry.worker_id or "").rsplit(":", 1)[-1]
        assert pid in pids, entry.worker_id
        claimed_by[pid] = claimed_by.get(pid, 0) + 1
        assert sync.job(job.id).status == "completed"
    assert sum(claimed_by.values()) == 16
    assert set(claimed_by) == pids, f"both processes claimed jobs: {claimed_by}"


def test_retry_path_backoff_progression_and_terminal_failed(
    make_sync: Callable[..., CalendarSync], provider: FakeProvider, db_url: str
) -> None:
    # The breaker threshold is raised so this test sees the retry schedule alone (with the
    # defaults the fifth failure also pauses the pair: see the circuit breaker test).
    sync = make_sync(breaker_threshold=50)
    provider.fail_all = True
    (job,) = sync.schedule(_request(str(uuid.uuid4())))
    delays = []
    for failure in range(1, 6):
        make_due(db_url, job.id)
        sync.app.run_job(job.id)
        after = sync.job(job.id)
        assert (after.status, after.retry_count, after.max_retries) == ("retrying", failure, 5)
        assert after.last_error is not None and "provider unavailable" in after.last_error
        last = sync.logs(job.id)[-1]
        assert after.next_run_at is not None
        delay = (after.next_run_at - last.finished_at).total_seconds()
        expected = 60 * 2 ** (failure - 1)  # 1, 2, 4, 8, 16 minutes
        assert expected * 0.9 - 0.01 <= delay <= min(expected * 1.1, 1800) + 0.01, (failure, delay)
        delays.append(delay)
    assert delays == sorted(delays), "each retry waits longer than the one before"
    # The cap: however many retries, never more than 30 minutes (±10 % stays under it).
    assert all(sync.retry_policy.delay_for(n) <= 1800 for n in range(1, 30))

    make_due(db_url, job.id)
    sync.app.run_job(job.id)
    final = sync.job(job.id)
    assert (final.status, final.retry_count, final.next_run_at) == ("failed", 5, None)
    logs = sync.logs(job.id)
    assert [entry.outcome for entry in logs] == ["failed"] * 6
    terminal = logs[-1]  # the terminal log entry
    assert terminal.failed_events == 4 and terminal.processed_events == 0
    assert terminal.error_summary is not None and "HTTP 503" in terminal.error_summary
    (alert,) = sync.alerts()
    assert (alert.category, alert.severity) == ("sync_job_failed", "error")
    assert alert.context["job_id"] == job.id
    assert set(alert.context) == {"job_id", "task", "error_code", "breaker_key"}, "a summary only"
    sync.app.run_job(job.id)
    assert len(sync.logs(job.id)) == 6, "a failed job is not run again"


def test_circuit_breaker_five_failures_pause_alert_skip_and_reset(
    make_client: Callable[..., TestClient], provider: FakeProvider, db_url: str
) -> None:
    client = make_client()
    sync = sync_of(client)
    sick, healthy = str(uuid.uuid4()), str(uuid.uuid4())
    connector = str(sync.settings.default_connector_id)
    provider.fail_pair(sick)
    sick_jobs = [sync.schedule(_request(sick, hour))[0] for hour in range(6)]
    healthy_jobs = [sync.schedule(_request(healthy, hour))[0] for hour in range(2)]

    # Five consecutive failures: the sixth job of the pair is never tried.
    ran = sync.app.work(queues=[QUEUE], batch=1)
    assert sorted(j.id for j in ran) == sorted(
        [j.id for j in sick_jobs[:5]] + [j.id for j in healthy_jobs]
    )
    (stats,) = [s for s in sync.failure_stats() if s.pair_id == sick]
    assert (stats.connector_id, stats.consecutive_failures, stats.state) == (connector, 5, "open")
    assert stats.last_failure_at is not None and stats.paused_until is not None
    pause = (stats.paused_until - stats.last_failure_at).total_seconds()
    assert abs(pause - 1800) < 2, pause  # paused_until = now + 30 minutes
    assert sync.failure_stats_for(connector, healthy) is not None
    assert sync.failure_stats_for(connector, healthy).consecutive_failures == 0  # type: ignore[union-attr]

    (alert,) = sync.alerts()
    assert (alert.category, alert.severity, alert.pair_id, alert.connector_id, alert.count) == (
        "sync_circuit_breaker",
        "warning",
        sick,
        connector,
        1,
    )

    # The API refuses new schedules for the pair; the scheduler skips it; the worker too.
    csrf = login(client)
    assert schedule(client, csrf, body(sick)).status_code == 409
    start = datetime(2025, 9, 23, tzinfo=UTC)
    round_ = sync.schedule_pairs(
        [(uuid.UUID(sick), None), (uuid.UUID(healthy), None)], start, start + timedelta(hours=1)
    )
    assert [j.pair_id for j in round_.scheduled] == [healthy]
    assert [s.pair_id for s in round_.skipped] == [sick]
    ran = sync.app.work(queues=[QUEUE], batch=1)
    assert [sync.job(j.id).pair_id for j in ran] == [healthy], "the worker skips the paused pair"
    for job in sick_jobs:
        waiting = sync.job(job.id)
        assert waiting.status in ("pending", "retrying")
        assert waiting.next_run_at is not None and waiting.next_run_at >= stats.paused_until
    assert len(sync.alerts()) == 1, "one alert, however often the pair is refused"

    # The provider recovers; after the pause one probe runs, succeeds and resets the pair.
    provider.heal_pair(sick)
    pass_time(db_url, breaker_key(connector, sick), 1800)
    probe = sync.app.work(queues=[QUEUE], limit=1, batch=1)
    assert [sync.job(j.id).status for j in probe] == ["completed"]
    (stats,) = [s for s in sync.failure_stats() if s.pair_id == sick]
    assert (stats.consecutive_failures, stats.paused_until, stats.state) == (0, None, "closed")
    assert sync.alerts() == []
    (resolved,) = sync.alerts(state="resolved")
    assert resolved.category == "sync_circuit_breaker" and resolved.pair_id == sick
    # The parked jobs are due again, and new schedules are accepted.
    sync.app.work(queues=[QUEUE], batch=1)
    for job in sick_jobs:
        make_due(db_url, job.id)
    sync.app.work(queues=[QUEUE], batch=1)
    assert {sync.job(j.id).status for j in sick_jobs} == {"completed"}
    assert schedule(client, csrf, body(sick)).status_code == 202
