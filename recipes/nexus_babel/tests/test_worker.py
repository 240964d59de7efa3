"""US-INFRA-09…11, 20, 25, FR-019 and EC-06: the worker CLI, leases and stale-lease recovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.waiting import wait_until

from recipes.nexus_babel import Settings
from recipes.nexus_babel.db import AuditLog
from recipes.nexus_babel.jobs import RECOVERY_ACTION
from recipes.nexus_babel.tests.helpers import headers, release_fifo, submit
from recipes.nexus_babel.worker import run_worker

ROOT = Path(__file__).resolve().parents[3]


def _job(client: TestClient, job_id: str) -> dict:  # type: ignore[type-arg]
    return client.get(f"/api/v1/jobs/{job_id}", headers=headers("viewer")).json()  # type: ignore[no-any-return]


def _worker_cmd(settings: Settings, *args: str) -> tuple[list[str], dict[str, str]]:
    env = os.environ | {
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "NEXUS_DATABASE_URL": settings.database_url,
        "NEXUS_CORPUS_ROOT": str(settings.corpus_root),
        "NEXUS_ENVIRONMENT": "test",
        "NEXUS_WORKER_POLL_SECONDS": "0.1",
        "NEXUS_WORKER_LEASE_SECONDS": str(settings.worker_lease_seconds),
    }
    return [sys.executable, "-m", "recipes.nexus_babel.worker", *args], env


def _run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    cmd, env = _worker_cmd(settings, *args)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.slow
def test_us_infra_09_worker_once_and_max_jobs(client: TestClient, settings: Settings) -> None:
    ids = [submit(client, "integrity_audit")["job_id"] for _ in range(4)]

    once = _run_cli(settings, "--once")
    assert once.returncode == 0, once.stderr
    assert "processed 1 job(s)" in once.stdout
    assert [_job(client, i)["status"] for i in ids] == ["succeeded", "queued", "queued", "queued"]
    # US-INFRA-23: the worker logs JSON lines, durq's and the recipe's, the job's with its ids
    # (durq logs a succeeded job only at DEBUG; the recipe logs each job it runs)
    lines = [json.loads(line) for line in once.stderr.splitlines() if line.strip()]
    assert any(line["logger"] == "durq.worker" for line in lines)
    of_job = [line for line in lines if line.get("job_id") == int(ids[0])]
    assert {line["logger"] for line in of_job} == {"nexus_babel.jobs"}
    assert all(line["worker_id"].endswith(":worker") and line["attempt"] == 1 for line in of_job)
    assert any(line["event"] == "job succeeded" and line["request_id"] for line in of_job)

    two = _run_cli(settings, "--max-jobs", "2")
    assert two.returncode == 0 and "processed 2 job(s)" in two.stdout, two.stderr
    assert [_job(client, i)["status"] for i in ids] == ["succeeded"] * 3 + ["queued"]

    # --once with an empty queue polls once and exits rather than waiting
    assert run_worker(settings, once=True) == 1
    empty = _run_cli(settings, "--once")
    assert empty.returncode == 0 and "processed 0 job(s)" in empty.stdout

    # EC-10: a poll interval of 0 is clamped to 0.1 s
    assert settings.model_copy(update={"worker_poll_seconds": 0}).worker_poll_interval == 0.1
    assert settings.model_copy(update={"worker_poll_seconds": 2.5}).worker_poll_interval == 2.5


@pytest.mark.slow
def test_us_infra_09_sigterm_lets_the_running_job_finish_then_exits(
    client: TestClient, settings: Settings, fifos: Callable[[str], Path]
) -> None:
    """SIGTERM stops claiming: the job in hand finishes and is written, the next waits."""
    pipe = fifos("long_scroll.txt")
    running = submit(client, "ingest_batch", {"paths": ["long_scroll.txt"]})["job_id"]
    waiting = submit(client, "integrity_audit")["job_id"]
    cmd, env = _worker_cmd(settings)
    worker = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: _job(client, running)["status"] == "running", timeout=30, what="claim")
        worker.send_signal(signal.SIGTERM)
        assert release_fifo(pipe, "Sing, O goddess.\n")
        out, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    assert "processed 1 job(s)" in out
    assert _job(client, running)["status"] == "succeeded"
    assert _job(client, waiting)["status"] == "queued"


def test_us_infra_11_lease_acquisition_oldest_first(
    make_client: Callable[..., TestClient], settings: Settings, fifos: Callable[[str], Path]
) -> None:
    client = make_client(worker_lease_seconds=30)
    queue_app = client.app.state.queue_app  # type: ignore[attr-defined]
    pipe = fifos("slow_scroll.txt")
    oldest = submit(client, "ingest_batch", {"paths": ["slow_scroll.txt"]})["job_id"]
    newer = [submit(client, "integrity_audit")["job_id"] for _ in range(2)]

    runner = threading.Thread(target=queue_app.work, kwargs={"limit": 1, "worker_id": "w-1"})
    runner.start()
    wait_until(lambda: _job(client, oldest)["status"] == "running", timeout=10, what="lease")
    held = _job(client, oldest)
    assert held["lease_owner"] == "w-1"
    started = datetime.fromisoformat(held["attempts"][-1]["started_at"])
    lease = (datetime.fromisoformat(held["lease_expires_at"]) - started).total_seconds()
    assert 29.0 <= lease <= 30.5, lease
    assert [_job(client, i)["status"] for i in newer] == ["queued", "queued"]

    assert release_fifo(pipe, "And it came to pass.\n")
    runner.join(10)
    assert _job(client, oldest)["status"] == "succeeded"


def test_us_infra_10_stale_lease_recovery_with_provenance(
    make_client: Callable[..., TestClient], fifos: Callable[[str], Path]
) -> None:
    client = make_client(worker_lease_seconds=0.5)
    service = client.app.state.job_service  # type: ignore[attr-defined]
    queue_app = client.app.state.queue_app  # type: ignore[attr-defined]
    pipe = fifos("stuck.txt")
    retried = submit(client, "ingest_batch", {"paths": ["stuck.txt"]})["job_id"]
    exhausted = submit(client, "ingest_batch", {"paths": ["stuck.txt"]}, max_attempts=1)["job_id"]

    # two "workers" that stall without heartbeating, so their leases run out
    stalled = [
        threading.Thread(target=queue_app.run_job, args=(int(j),), kwargs={"worker_id": w})
        for j, w in ((retried, "crashed-a"), (exhausted, "crashed-b"))
    ]
    for thread in stalled:
        thread.start()
    wait_until(
        lambda: all(_job(client, j)["status"] == "running" for j in (retried, exhausted)),
        what="both running",
    )
    events: list[dict] = []  # type: ignore[type-arg]

    def recovered_both() -> bool:
        events.extend(service.recover_stale_leases("recoverer"))
        return len(events) == 2

    wait_until(recovered_both, timeout=10, what="both leases expired and recovered")
    by_job = {e["job_id"]: e for e in events}
    assert by_job[retried]["status"] == "retry_wait"
    assert by_job[exhausted]["status"] == "failed"
    assert by_job[retried]["original_lease_owner"] == "crashed-a"
    assert by_job[exhausted]["original_lease_owner"] == "crashed-b"

    view = _job(client, retried)
    assert view["status"] == "retry_wait" and view["lease_owner"] is None
    lost = view["attempts"][-1]
    assert lost["outcome"] == "lost" and lost["worker_id"] == "crashed-a"
    backoff = datetime.fromisoformat(view["next_run_at"]) - datetime.fromisoformat(
        lost["finished_at"]
    )
    assert 2.0 <= backoff.total_seconds() < 2.5  # the same schedule as a failure

    db = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        audits = session.scalars(select(AuditLog).where(AuditLog.action == RECOVERY_ACTION)).all()
    assert sorted(a.details["original_lease_owner"] for a in audits) == ["crashed-a", "crashed-b"]
    assert {a.actor for a in audits} == {"recoverer"}

    # the stalled workers wake: their late writes are fenced off and change nothing
    for _ in stalled:
        release_fifo(pipe, "late\n")
    for thread in stalled:
        thread.join(10)
    assert _job(client, retried)["status"] == "retry_wait"
    assert _job(client, exhausted)["status"] == "failed"


@pytest.mark.slow
def test_us_infra_10_ec_06_worker_killed_mid_job_is_recovered(
    make_client: Callable[..., TestClient], fifos: Callable[[str], Path], corpus: Path
) -> None:
    """EC-06: a real worker process dies holding a job; another recovers and finishes it."""
    client = make_client(worker_lease_seconds=1)
    settings: Settings = client.app.state.settings  # type: ignore[attr-defined]
    pipe = fifos("scroll.txt")
    job_id = submit(client, "ingest_batch", {"paths": ["scroll.txt"]})["job_id"]

    cmd, env = _worker_cmd(settings)
    victim = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: _job(client, job_id)["status"] == "running", timeout=30, what="claim")
        owner = _job(client, job_id)["lease_owner"]
        assert owner.split(":")[1] == str(victim.pid)
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL
    finally:
        if victim.poll() is None:
            victim.kill()
    assert _job(client, job_id)["status"] == "running"  # the dead worker's lease still stands

    pipe.unlink()  # the file now reads normally
    pipe.write_text("Many cities did he visit.\n", encoding="utf-8")
    rescuer = _run_cli(settings, "--max-jobs", "1")
    assert rescuer.returncode == 0, rescuer.stderr

    view = _job(client, job_id)
    assert view["status"] == "succeeded"
    assert [a["outcome"] for a in view["attempts"]] == ["lost", "succeeded"]
    assert view["attempts"][0]["worker_id"] == owner
    assert view["attempts"][1]["worker_id"] != owner
    db = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        audit = session.scalar(select(AuditLog).where(AuditLog.action == RECOVERY_ACTION))
    assert audit is not None and audit.details["original_lease_owner"] == owner


def test_us_infra_25_competing_workers_never_double_run(
    client: TestClient, settings: Settings
) -> None:
    ids = [submit(client, "integrity_audit")["job_id"] for _ in range(6)]
    counts: list[int] = []
    workers = [
        threading.Thread(target=lambda: counts.append(run_worker(settings, max_jobs=6, stop=stop)))
        for _ in range(2)
    ]
    stop = threading.Event()
    for w in workers:
        w.start()
    wait_until(
        lambda: all(_job(client, i)["status"] == "succeeded" for i in ids),
        timeout=30,
        what="all done",
    )
    stop.set()
    for w in workers:
        w.join(10)
    assert sum(counts) == 6
    for i in ids:
        assert [a["status"] for a in _job(client, i)["attempts"]] == ["succeeded"]


def test_fr_019_a_failing_job_never_stops_the_worker(
    client: TestClient, settings: Settings
) -> None:
    """A job that raises is only its attempt's outcome: the worker goes on to the next."""
    broken = submit(client, "branch_replay", {"branch": "Bad Name"})["job_id"]  # fails at once
    flaky = submit(client, "ingest_batch", {"paths": ["arrives_later.txt"]})["job_id"]  # retries
    fine = submit(client, "integrity_audit")["job_id"]

    assert run_worker(settings, max_jobs=3) == 3
    assert [_job(client, i)["status"] for i in (broken, flaky, fine)] == [
        "failed",
        "retry_wait",
        "succeeded",
    ]
    assert "arrives_later.txt" in _job(client, flaky)["error_text"]
