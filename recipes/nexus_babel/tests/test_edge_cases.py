"""The seed's edge cases that were gaps or untested: EC-03, EC-09, EC-12, EC-13, EC-16."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pydantic
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from recipes.nexus_babel import Settings, create_app
from recipes.nexus_babel.db import ApiKey
from recipes.nexus_babel.jobs import JOB_TYPES
from recipes.nexus_babel.metrics import MetricsService
from recipes.nexus_babel.tests.helpers import headers, serving, submit

ROOT = Path(__file__).resolve().parents[3]
NO_SAMPLES = {"count": 0, "avg_ms": 0.0, "p95_ms": 0.0}


def _utc(value: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; they are stored in UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _last_used(client_or_app: object, owner: str) -> datetime | None:
    db = client_or_app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        stamp: datetime | None = session.scalar(
            select(ApiKey.last_used_at).where(ApiKey.owner == owner)
        )
    return _utc(stamp) if stamp is not None else None


def test_ec_03_concurrent_authentication_never_fails_or_loses_the_newest_stamp(
    make_settings: Callable[..., Settings],
) -> None:
    """Many requests with one key at once, on a real server: every one is answered, and
    ``last_used_at`` ends at least as late as the last request began."""
    app = create_app(make_settings())
    requests = 32

    with serving(app) as base:

        def whoami(_: int) -> tuple[int, datetime]:
            began = datetime.now(UTC)
            with httpx.Client(base_url=base, timeout=30) as http:
                response = http.get("/api/v1/auth/whoami", headers=headers("viewer"))
            return response.status_code, began

        with ThreadPoolExecutor(12) as pool:
            results = list(pool.map(whoami, range(requests)))
        stamped = _last_used(app, "dev-viewer")

        assert [status for status, _ in results] == [200] * requests
        assert stamped is not None and stamped >= max(began for _, began in results)

        # a writer that read an older time can never move the stamp back
        ahead = datetime.now(UTC) + timedelta(hours=1)
        with app.state.db.session() as session, session.begin():
            session.execute(
                update(ApiKey).where(ApiKey.owner == "dev-viewer").values(last_used_at=ahead)
            )
        assert httpx.get(f"{base}/api/v1/auth/whoami", headers=headers("viewer")).is_success
        assert _last_used(app, "dev-viewer") == ahead


def _unreachable(db_url: str, tmp_path: Path) -> str:
    """A database URL like ``db_url`` that cannot be opened, with a password to hide."""
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'no_such_folder' / 'nexus.db'}"
    parts = urlsplit(db_url)
    netloc = f"{parts.username or 'postgres'}:s3cret-pw@{parts.hostname}:{parts.port or 5432}"
    return urlunsplit((parts.scheme, netloc, "/nexus_babel_no_such_db", "", ""))


@pytest.mark.slow
def test_ec_09_worker_without_a_database_exits_with_a_clear_error(
    db_url: str, tmp_path: Path, settings: Settings
) -> None:
    """The worker started with no database says which setting to fix and exits 2, with no
    traceback and no password in its output."""
    url = _unreachable(db_url, tmp_path)
    env = os.environ | {
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "NEXUS_DATABASE_URL": url,
        "NEXUS_CORPUS_ROOT": str(settings.corpus_root),
        "NEXUS_ENVIRONMENT": "test",
    }
    done = subprocess.run(
        [sys.executable, "-m", "recipes.nexus_babel.worker", "--once"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "NEXUS_DATABASE_URL" in done.stderr and "unavailable" in done.stderr
    assert "Traceback" not in output
    assert "s3cret-pw" not in output
    assert not (tmp_path / "no_such_folder").exists()  # nothing was created on the way


def test_ec_12_a_timing_key_with_no_samples_reports_zeros(client: TestClient) -> None:
    """The platform declares its timing keys up front: before any sample each reads
    ``{"count": 0, "avg_ms": 0.0, "p95_ms": 0.0}``, then fills as requests and jobs run."""
    first = client.get("/metrics").json()  # this request is recorded only after it answers
    assert first["counters"] == {}
    assert first["timings"]["http.request.ms"] == NO_SAMPLES
    for job_type in JOB_TYPES:
        assert first["timings"][f"jobs.{job_type}.ms"] == NO_SAMPLES

    assert submit(client, "integrity_audit", execution_mode="sync")["status"] == "succeeded"
    timings = client.get("/metrics").json()["timings"]
    assert timings["http.request.ms"]["count"] == 2
    audit = timings["jobs.integrity_audit.ms"]
    assert audit["count"] == 1 and audit["avg_ms"] == audit["p95_ms"] > 0
    assert timings["jobs.analyze.ms"] == NO_SAMPLES

    declared = MetricsService(timings=["queue.wait.ms"])
    assert declared.snapshot() == {"counters": {}, "timings": {"queue.wait.ms": NO_SAMPLES}}


def test_ec_13_in_memory_metrics_are_lost_on_restart_the_queue_is_not(
    make_settings: Callable[..., Settings],
) -> None:
    """The JSON metrics live in one process and start empty after a restart; the jobs and
    the Prometheus job gauges, read from the database, carry on."""
    settings = make_settings()
    with TestClient(create_app(settings)) as first:
        assert submit(first, "integrity_audit", execution_mode="sync")["status"] == "succeeded"
        queued = submit(first, "integrity_audit")["job_id"]
        counters = first.get("/metrics").json()["counters"]
        assert counters["jobs.integrity_audit.succeeded"] == 1
        assert counters["http.status.200"] == 2

    with TestClient(create_app(settings)) as restarted:
        body = restarted.get("/metrics").json()
        assert body["counters"] == {}
        assert all(timing["count"] == 0 for timing in body["timings"].values())
        assert "nexus_jobs_queued 1.0" in restarted.get("/metrics/prometheus").text
        listed = restarted.get("/api/v1/jobs", headers=headers("viewer")).json()["jobs"]
        assert [j["status"] for j in listed] == ["queued", "succeeded"]
        assert listed[0]["job_id"] == queued


def test_ec_16_a_missing_corpus_root_is_rejected_at_start_up(
    make_settings: Callable[..., Settings],
    make_client: Callable[..., TestClient],
    corpus: Path,
    tmp_path: Path,
) -> None:
    """``NEXUS_CORPUS_ROOT`` must name a folder when the platform starts; one that vanishes
    later fails ingestion with an error naming the setting, retried on the schedule."""
    with pytest.raises(pydantic.ValidationError, match="NEXUS_CORPUS_ROOT"):
        make_settings(corpus_root=tmp_path / "no_such_corpus")
    a_file = tmp_path / "corpus.txt"
    a_file.write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(pydantic.ValidationError, match="NEXUS_CORPUS_ROOT"):
        make_settings(corpus_root=a_file)

    client = make_client()
    shutil.rmtree(corpus)
    job = submit(client, "ingest_batch", {"paths": ["sonnet_18.txt"]}, execution_mode="sync")
    assert job["status"] == "retry_wait"
    assert "NEXUS_CORPUS_ROOT" in job["error_text"]
