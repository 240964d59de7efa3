"""US-INFRA-12…17, 21, 24, the sync pool, and the success-criteria table."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect
from tests.waiting import wait_until

from recipes.nexus_babel import Settings, create_app, get_settings
from recipes.nexus_babel.db import DBManager
from recipes.nexus_babel.metrics import MetricsService
from recipes.nexus_babel.plugins import MLStubLayerPlugin, PluginRegistry
from recipes.nexus_babel.tests.helpers import headers, release_fifo, submit


def test_us_infra_12_in_memory_metrics(client: TestClient) -> None:
    metrics = MetricsService()
    assert metrics.snapshot() == {"counters": {}, "timings": {}}  # EC-11
    metrics.inc("a")
    metrics.inc("a", 2.5)
    rng = random.Random(42)
    samples = [rng.uniform(1, 250) for _ in range(400)]
    for value in samples:
        metrics.observe("t", value)
    snap = metrics.snapshot()
    assert snap["counters"] == {"a": 3.5}
    timing = snap["timings"]["t"]
    assert timing["count"] == 400 and timing["avg_ms"] == pytest.approx(statistics.fmean(samples))
    independent = statistics.quantiles(samples, n=100, method="inclusive")[94]
    assert abs(timing["p95_ms"] - independent) <= 1.0  # success criterion: within 1 ms

    client.get("/healthz")
    client.get("/api/v1/auth/whoami")  # 401
    body = client.get("/metrics").json()  # no key needed (FR-023)
    assert body["counters"]["http.status.200"] >= 1 and body["counters"]["http.status.401"] == 1
    assert body["timings"]["http.request.ms"]["count"] >= 2


def test_us_infra_13_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_us_infra_14_request_id(client: TestClient) -> None:
    generated = client.get("/healthz").headers["X-Request-ID"]
    assert len(generated) == 36 and generated.count("-") == 4
    assert client.get("/healthz").headers["X-Request-ID"] != generated
    echoed = client.get("/api/v1/auth/whoami", headers={"X-Request-ID": "trace-123"})
    assert echoed.status_code == 401 and echoed.headers["X-Request-ID"] == "trace-123"
    # an id too long (or not plain text) to copy into logs, spans and jobs is replaced
    replaced = client.get("/healthz", headers={"X-Request-ID": "x" * 129}).headers["X-Request-ID"]
    assert len(replaced) == 36 and replaced.count("-") == 4


def test_us_infra_15_plugin_chain(make_client: Callable[..., TestClient]) -> None:
    baseline = {"tokens": 10}
    det = PluginRegistry("deterministic", ml_enabled=True).run_layer("lexical", "t", baseline, 0.6)
    assert (det.provider_name, det.output, det.confidence, det.fallback_reason) == (
        "deterministic",
        baseline,
        0.6,
        None,
    )
    ml = PluginRegistry("ml_first", ml_enabled=True).run_layer("lexical", "t", baseline, 0.6)
    assert ml.provider_name == "ml_stub" and ml.confidence == pytest.approx(0.7)
    assert ml.output["ml_enriched"] is True and ml.provider_version and ml.runtime_ms >= 0
    capped = PluginRegistry("ml_first", ml_enabled=True).run_layer("lexical", "t", baseline, 0.9)
    assert capped.confidence == 0.95
    off = PluginRegistry("ml_first", ml_enabled=False).run_layer("lexical", "t", baseline, 0.6)
    assert off.provider_name == "deterministic" and "ml_stub" in (off.fallback_reason or "")
    none = PluginRegistry("ml_only", ml_enabled=False).run_layer("lexical", "t", baseline, 0.6)
    assert (none.output, none.confidence, none.fallback_reason) == (
        baseline,
        0.0,
        "all_plugins_failed",
    )

    class Broken(MLStubLayerPlugin):
        def run(self, *args: object, **kwargs: object) -> tuple[dict[str, object], float]:
            raise RuntimeError("model server unreachable")

    registry = PluginRegistry("ml_first", ml_enabled=True)
    registry.plugins["ml_stub"] = Broken(enabled=True)
    fell = registry.run_layer("lexical", "t", baseline, 0.6)
    assert fell.provider_name == "deterministic" and "model server unreachable" in (
        fell.fallback_reason or ""
    )
    assert PluginRegistry("ml_first", ml_enabled=False).health() == {
        "deterministic": True,
        "ml_stub": False,
    }

    # through an analyze job, with the profile from settings
    client = make_client(plugin_profile="ml_first", plugin_ml_enabled=True)
    submit(client, "ingest_batch", {"paths": ["odyssey_opening.txt"]}, execution_mode="sync")
    job = submit(client, "analyze", {"path": "odyssey_opening.txt"}, execution_mode="sync")
    assert {layer["provider_name"] for layer in job["result"]["layers"].values()} == {"ml_stub"}
    health = client.get("/api/v1/plugins/health", headers=headers("viewer")).json()
    assert health == {"deterministic": True, "ml_stub": True}


def test_us_infra_16_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings().environment == "dev"  # EC-14: no .env is fine
    assert (Settings().async_jobs_enabled, Settings().plugin_ml_enabled) == (True, False)
    assert (Settings().raw_mode_enabled, Settings().shadow_execution_enabled) == (True, False)
    (tmp_path / ".env").write_text("NEXUS_WORKER_POLL_SECONDS=7\nNEXUS_ENVIRONMENT=test\n")
    assert Settings().worker_poll_seconds == 7 and Settings().environment == "test"
    monkeypatch.setenv("NEXUS_WORKER_POLL_SECONDS", "3")  # the environment beats .env
    assert Settings().worker_poll_seconds == 3

    get_settings.cache_clear()
    assert get_settings() is get_settings()
    get_settings.cache_clear()

    # EC-15 and the success criterion: invalid settings are rejected at start-up
    monkeypatch.setenv("NEXUS_ENVIRONMENT", "staging")
    with pytest.raises(pydantic.ValidationError, match="environment"):
        Settings()
    monkeypatch.delenv("NEXUS_ENVIRONMENT")
    (tmp_path / ".env").unlink()
    with pytest.raises(pydantic.ValidationError):
        Settings(worker_poll_seconds="soon")
    with pytest.raises(pydantic.ValidationError, match="published dev default"):
        Settings(environment="prod")

    override = make_settings(app_name="Override")
    with TestClient(create_app(override)) as client:
        assert client.app.state.settings is override  # type: ignore[attr-defined]
        assert client.get("/openapi.json").json()["info"]["title"] == "Override"


def test_us_infra_17_db_manager(db_url: str, tmp_path: Path) -> None:
    manager = DBManager(db_url)
    try:
        if db_url.startswith("sqlite"):
            assert manager.connect_args["check_same_thread"] is False
        else:
            assert manager.engine.dialect.name == "postgresql"
        session = manager.session()
        assert session.autoflush is False
        session.close()
        manager.create_all()
        tables = set(inspect(manager.engine).get_table_names())
        assert {"api_keys", "documents", "audit_logs"} <= tables
    finally:
        manager.close()


def test_us_infra_21_rate_limit_per_key(make_client: Callable[..., TestClient]) -> None:
    client = make_client(rate_limit_per_second=0.01, rate_limit_burst=2)
    who = [client.get("/api/v1/auth/whoami", headers=headers("viewer")) for _ in range(3)]
    assert [r.status_code for r in who] == [200, 200, 429]
    assert int(who[2].headers["Retry-After"]) >= 1
    # another key has its own bucket
    assert client.get("/api/v1/auth/whoami", headers=headers("admin")).status_code == 200


def test_us_infra_24_prometheus(client: TestClient) -> None:
    submit(client, "integrity_audit")
    submit(client, "integrity_audit", execution_mode="sync")
    response = client.get("/metrics/prometheus")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert (
        'nexus_http_requests_total{method="POST",path="/api/v1/jobs/submit",status="200"} 2.0'
        in text
    )
    assert (
        'nexus_http_request_duration_seconds_count{method="POST",path="/api/v1/jobs/submit"} 2.0'
        in text
    )
    assert "nexus_jobs_queued 1.0" in text and "nexus_jobs_running 0.0" in text
    assert "nexus-dev" not in text  # no key material in the exposition


def test_sync_mode_is_bounded_and_never_stalls_the_server(
    make_client: Callable[..., TestClient], fifos: Callable[[str], Path]
) -> None:
    client = make_client(sync_max_concurrency=1, sync_timeout_seconds=0.5)
    pipe = fifos("endless.txt")
    body = {
        "job_type": "ingest_batch",
        "payload": {"paths": ["endless.txt"]},
        "execution_mode": "sync",
    }
    stalled = client.post("/api/v1/jobs/submit", headers=headers("operator"), json=body)
    assert stalled.status_code == 202 and stalled.json()["status"] == "running"
    busy = client.post(
        "/api/v1/jobs/submit",
        headers=headers("operator"),
        json={"job_type": "integrity_audit", "execution_mode": "sync"},
    )
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "1"
    assert client.get("/healthz").status_code == 200  # the server still answers
    assert release_fifo(pipe, "at last\n")
    wait_until(
        lambda: (
            client.get(
                f"/api/v1/jobs/{stalled.json()['job_id']}", headers=headers("viewer")
            ).json()["status"]
            == "succeeded"
        ),
        what="the stalled job to finish",
    )
    assert submit(client, "integrity_audit", execution_mode="sync")["status"] == "succeeded"


def test_success_criteria_all_six_statuses(
    make_client: Callable[..., TestClient], fifos: Callable[[str], Path]
) -> None:
    client = make_client(sync_timeout_seconds=0.3)
    pipe = fifos("held.txt")
    expected = {
        "running": submit(client, "ingest_batch", {"paths": ["held.txt"]}, execution_mode="sync"),
        "queued": submit(client, "integrity_audit"),
        "succeeded": submit(client, "integrity_audit", execution_mode="sync"),
        "retry_wait": submit(
            client, "ingest_batch", {"paths": ["later.txt"]}, execution_mode="sync"
        ),
        "failed": submit(client, "branch_replay", {"branch": "Bad Name"}, execution_mode="sync"),
        "cancelled": submit(client, "integrity_audit"),
    }
    client.post(
        f"/api/v1/jobs/{expected['cancelled']['job_id']}/cancel", headers=headers("operator")
    )
    for status, job in expected.items():
        listed = client.get(
            "/api/v1/jobs", headers=headers("viewer"), params={"status": status}
        ).json()
        assert [j["job_id"] for j in listed["jobs"]] == [job["job_id"]], status
    assert release_fifo(pipe, "done\n")
