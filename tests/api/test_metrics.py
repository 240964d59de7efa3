"""/metrics: valid Prometheus text, job metrics from the database, route-template labels."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import warnings
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

import durq
from durq.api import create_app

from .conftest import Api

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: TestClient) -> tuple[str, Samples, dict[str, str]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(response.text):  # the official parser
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return response.text, samples, types


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def run_jobs_in_another_process(db_url: str) -> None:
    """A separate worker process: the server must see its jobs without sharing memory."""
    code = textwrap.dedent(f"""
        import durq
        app = durq.App({db_url!r})

        @app.task(queue="remote")
        def remote(n: int) -> int:
            return n

        remote.enqueue(n=1)
        remote.enqueue(n=2)
        assert len(app.work(queues=["remote"])) == 2
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_metrics_read_jobs_from_the_database(api: Api, make_app: Any) -> None:
    @api.app.task(max_attempts=2, retry=durq.Fixed([0]))
    def flaky_fast() -> None:
        raise ConnectionError("down")

    # Jobs run by App.run_job in this thread: no worker runs beside the API, so the
    # second "add" stays queued.
    done = api.submit()
    assert api.app.run_job(done["id"]).state == "succeeded"
    api.submit()
    retried = api.submit(task="flaky_fast")
    assert api.app.run_job(retried["id"]).state == "retry_wait"
    assert api.app.run_job(retried["id"]).state == "dead_letter"
    run_jobs_in_another_process(api.app.database_url)
    api.call("GET", "/v1/jobs/424242", "viewer")  # a 404 on a templated route

    text, samples, types = scrape(api.client)
    assert types["durq_jobs_total"] == "unknown"  # a snapshot, but its name ends in _total
    assert types["durq_queue_depth"] == "gauge"
    assert types["durq_job_duration_seconds"] == "histogram"
    assert types["durq_job_retries"] == "counter"
    assert types["durq_http_requests"] == "counter"
    assert types["durq_http_request_duration_seconds"] == "histogram"
    assert value(samples, "durq_database_up") == 1

    jobs = "durq_jobs_total"
    assert value(samples, jobs, queue="default", task="add", state="succeeded") == 1
    assert value(samples, jobs, queue="default", task="add", state="queued") == 1
    assert value(samples, jobs, queue="default", task="flaky_fast", state="dead_letter") == 1
    assert value(samples, jobs, queue="remote", task="remote", state="succeeded") == 2
    depth = "durq_queue_depth"
    assert value(samples, depth, queue="default", state="queued") == 1
    assert (
        "durq_queue_depth",
        frozenset({("queue", "remote"), ("state", "running")}),
    ) in samples  # every queue reports every active state, zeros too

    ok = {"queue": "remote", "task": "remote", "outcome": "succeeded"}
    assert value(samples, "durq_job_duration_seconds_count", **ok) == 2
    assert value(samples, "durq_job_duration_seconds_bucket", **ok, le="+Inf") == 2
    failed = {"queue": "default", "task": "flaky_fast", "outcome": "failed"}
    assert value(samples, "durq_job_duration_seconds_count", **failed) == 2
    assert value(samples, "durq_job_retries_total", queue="default", task="flaky_fast") == 1
    assert value(samples, "durq_job_retries_total", queue="remote", task="remote") == 0

    http = {"method": "GET", "route": "/v1/jobs/{job_id}", "status": "404"}
    assert value(samples, "durq_http_requests_total", **http) == 1
    routes = {dict(labels).get("route") for (_, labels) in samples} - {None}
    templates = set(api.client.get("/openapi.json").json()["paths"])
    assert routes <= templates | {"unmatched"}, routes - templates
    assert "424242" not in text

    # a second server over the same database reports the same job metrics
    other = TestClient(create_app(make_app()))
    _, other_samples, _ = scrape(other)
    job_series = {k: v for k, v in samples.items() if k[0].startswith(("durq_job", "durq_queue"))}
    assert {k: other_samples[k] for k in job_series} == job_series
    other.close()

    promtool = shutil.which("promtool")
    if promtool:  # the stricter linter, where installed
        subprocess.run([promtool, "check", "metrics"], input=text.encode(), check=True)


def test_metrics_carry_the_apps_own_job_metric_names(api: Api) -> None:
    @api.app.task(name="sync_pair", max_attempts=2, retry=durq.Fixed([0]))
    def sync_pair(connector_id: str, ok: bool) -> None:
        if not ok:
            raise ConnectionError("provider down")

    api.app.add_job_metrics(
        durq.JobMetrics(
            tasks=("sync_pair",),
            jobs_total="sync_jobs_total",
            queue_depth="sync_jobs_queue_depth",
            duration="sync_job_duration_seconds",
            retries="sync_job_retries_total",
            state_label="status",
            state_names={"succeeded": "completed", "retry_wait": "retrying"},
            outcome_names={"succeeded": "success"},
            arg_labels=("connector_id",),
        )
    )
    done = api.app.enqueue("sync_pair", {"connector_id": "c1", "ok": True})
    failing = api.app.enqueue("sync_pair", {"connector_id": "c2", "ok": False})
    api.app.enqueue("add", {"x": 1, "y": 2})  # another task: not counted
    api.app.run_job(done.id)
    api.app.run_job(failing.id)

    _, samples, types = scrape(api.client)
    assert types["sync_jobs"] == "counter" and types["sync_jobs_queue_depth"] == "gauge"
    assert types["sync_job_duration_seconds"] == "histogram"
    assert value(samples, "sync_jobs_total", status="completed", connector_id="c1") == 1
    assert value(samples, "sync_jobs_total", status="retrying", connector_id="c2") == 1
    assert value(samples, "sync_jobs_queue_depth", status="retrying") == 1
    assert value(samples, "sync_jobs_queue_depth", status="queued") == 0  # "add" is not sync
    assert value(samples, "sync_job_duration_seconds_count", outcome="success") == 1
    assert value(samples, "sync_job_duration_seconds_count", outcome="failed") == 1
    assert ("sync_job_retries_total", frozenset({("connector_id", "c2")})) in samples


def test_job_metrics_refuse_names_prometheus_cannot_take() -> None:
    good = {
        "tasks": ("t",),
        "jobs_total": "a_total",
        "queue_depth": "a_depth",
        "duration": "a_seconds",
        "retries": "a_retries_total",
    }
    durq.JobMetrics(**good)  # type: ignore[arg-type]
    for bad in (
        {"tasks": ()},
        {"jobs_total": "a-total"},
        {"retries": "a_retries"},
        {"state_label": "le"},
        {"arg_labels": ("x", "y")},
        {"arg_labels": ("state",)},
    ):
        try:
            durq.JobMetrics(**(good | bad))  # type: ignore[arg-type]
        except durq.ValidationError:
            continue
        raise AssertionError(f"accepted {bad}")
