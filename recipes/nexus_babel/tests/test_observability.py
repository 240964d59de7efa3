"""US-INFRA-23: JSON log lines with request and job ids; OpenTelemetry spans for the
platform's requests, its jobs (in the API and in the worker) and its plugin runs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from durq import _tracing
from recipes.nexus_babel import Settings, create_app
from recipes.nexus_babel.tests.helpers import KEYS, headers
from recipes.nexus_babel.worker import run_worker

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class Spans:
    """The spans one test's provider finished (the SDK's own in-memory exporter)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def named(self, name: str, **attributes: Any) -> list[ReadableSpan]:
        return [
            span
            for span in self.exporter.get_finished_spans()
            if span.name == name
            and all((span.attributes or {}).get(k) == v for k, v in attributes.items())
        ]

    def one(self, name: str, **attributes: Any) -> ReadableSpan:
        found = self.named(name, **attributes)
        assert len(found) == 1, (name, attributes, self.exporter.get_finished_spans())
        return found[0]


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    # durq traces with the global provider in production; a test hands it one directly
    _tracing.use(recorded.provider)
    try:
        yield recorded
    finally:
        _tracing.use(None)
        recorded.provider.shutdown()


def _submit(client: TestClient, request_id: str, body: dict[str, Any], **extra: str) -> Any:
    response = client.post(
        "/api/v1/jobs/submit",
        headers=headers("operator") | {"X-Request-ID": request_id} | extra,
        json=body,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def _span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def test_us_infra_23_spans_for_requests_jobs_and_plugins(
    make_settings: Callable[..., Settings], spans: Spans
) -> None:
    settings = make_settings()
    with TestClient(create_app(settings, tracer_provider=spans.provider)) as client:
        ingest = _submit(
            client,
            "req-ingest",
            {
                "job_type": "ingest_batch",
                "payload": {"paths": ["genesis_babel.txt"]},
                "execution_mode": "sync",
            },
        )
        analyze = _submit(
            client,
            "req-analyze",
            {"job_type": "analyze", "payload": {"path": "genesis_babel.txt"}},
            traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
        )
        bad = client.post(
            "/api/v1/jobs/submit",
            headers=headers("operator") | {"X-Request-ID": "req-bad"},
            json={
                "job_type": "ingest_batch",
                "payload": {"paths": ["missing.txt"]},
                "execution_mode": "sync",
            },
        ).json()
        assert (ingest["status"], analyze["status"], bad["status"]) == (
            "succeeded",
            "queued",
            "retry_wait",
        )
    # the async job runs in the worker, with its own platform, on the same provider
    assert run_worker(settings, once=True, tracer_provider=spans.provider) == 1

    # a request: one server span named by its route, with the request id and the outcome
    request = spans.one("POST /api/v1/jobs/submit", **{"nexus.request_id": "req-ingest"})
    assert request.kind is SpanKind.SERVER
    assert request.attributes is not None
    assert request.attributes["http.route"] == "/api/v1/jobs/submit"
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["nexus.api_key.owner"] == "dev-operator"

    # the job it submitted: durq's enqueue span is the request's child, and the recipe's
    # job span nests under durq's execute span, all in the request's trace
    job_id = int(ingest["job_id"])
    enqueue = spans.one("durq.enqueue", **{"durq.job.id": job_id})
    execute = spans.one("durq.execute", **{"durq.job.id": job_id})
    job = spans.one("nexus_babel.job ingest_batch", **{"nexus.job_id": job_id})
    assert _parent_id(enqueue) == _span_id(request)
    assert _parent_id(job) == _span_id(execute)
    assert {_trace_id(s) for s in (request, enqueue, execute, job)} == {_trace_id(request)}
    assert job.attributes is not None
    assert job.attributes["nexus.request_id"] == "req-ingest"
    assert job.attributes["nexus.attempt"] == 1
    assert job.status.status_code is not StatusCode.ERROR

    # the async job, run by the worker: still the trace of the caller who submitted it
    # (its traceparent header), and one plugin span per analysis layer under the job
    caller = spans.one("POST /api/v1/jobs/submit", **{"nexus.request_id": "req-analyze"})
    assert f"{_trace_id(caller):032x}" == CALLER_TRACE
    assert f"{_parent_id(caller):016x}" == CALLER_SPAN
    worked = spans.one("nexus_babel.job analyze", **{"nexus.job_id": int(analyze["job_id"])})
    assert _trace_id(worked) == _trace_id(caller)
    assert worked.attributes is not None
    assert str(worked.attributes["nexus.worker_id"]).endswith(":worker")
    plugins = [p for p in spans.named("nexus_babel.plugin") if _parent_id(p) == _span_id(worked)]
    assert sorted(str((p.attributes or {})["nexus.plugin.layer"]) for p in plugins) == [
        "lexical",
        "structural",
        "stylistic",
    ]
    assert {(p.attributes or {})["nexus.plugin.provider_name"] for p in plugins} == {
        "deterministic"
    }

    # a failed attempt marks its job span as an error
    failed = spans.one("nexus_babel.job ingest_batch", **{"nexus.request_id": "req-bad"})
    assert failed.status.status_code is StatusCode.ERROR
    assert "missing.txt" in (failed.status.description or "")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """The app configures process-wide logging; put the test process's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    config = structlog.get_config()
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.configure(**config)


def test_us_infra_23_json_logs_carry_request_and_job_ids(
    make_settings: Callable[..., Settings],
    capsys: pytest.CaptureFixture[str],
    restore_logging: None,
) -> None:
    with TestClient(create_app(make_settings(log_format="json"))) as client:
        job = _submit(
            client,
            "req-log-1",
            {"job_type": "integrity_audit", "execution_mode": "sync"},
        )
        assert client.get("/api/v1/auth/whoami", headers=headers("viewer")).status_code == 200
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]

    [request] = [
        line for line in lines if line["event"] == "request" and line["request_id"] == "req-log-1"
    ]
    assert request["logger"] == "nexus_babel.http" and request["level"] == "info"
    assert request["path"] == "/api/v1/jobs/submit" and request["status"] == 200
    assert request["owner"] == "dev-operator" and request["duration_ms"] > 0
    assert request["timestamp"].endswith("Z")

    of_job = [
        line
        for line in lines
        if line.get("job_id") == int(job["job_id"]) and line["logger"] == "nexus_babel.jobs"
    ]
    assert [line["event"] for line in of_job] == ["job started", "job succeeded"]
    for line in of_job:
        assert line["job_type"] == "integrity_audit" and line["attempt"] == 1
        assert line["request_id"] == "req-log-1"
        assert line["worker_id"].endswith(":api-sync")
    assert of_job[-1]["runtime_ms"] >= 0

    # every line is JSON, and no API key appears in any of them
    assert all(line.startswith("{") for line in err.splitlines() if line.strip())
    assert not any(key in err for key in KEYS.values())
