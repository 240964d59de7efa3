"""The HTTP contract: request ids, the error envelope, bad input, limits, health."""

from __future__ import annotations

import socket
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from fastapi import FastAPI
from structlog.testing import capture_logs

import durq
from durq.api import create_app

from .conftest import Api

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def test_request_id_is_propagated_or_generated_everywhere(api: Api) -> None:
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        given = api.call(
            "POST",
            "/v1/jobs",
            "producer",
            json={"task": "add", "args": {"x": 1, "y": 2}},
            headers={"X-Request-ID": "trace-abc.123"},
        )
    assert given.headers["X-Request-ID"] == "trace-abc.123"
    events = {e["event"]: e for e in logs}
    assert events["job_submitted"]["request_id"] == "trace-abc.123"
    assert events["http_request"]["request_id"] == "trace-abc.123"
    assert events["http_request"]["route"] == "/v1/jobs"

    generated = api.call("GET", "/v1/jobs/424242", "viewer")
    request_id = generated.headers["X-Request-ID"]
    assert len(request_id) == 32 and generated.json()["error"]["request_id"] == request_id
    # ids that are unsafe in headers and logs are replaced, not echoed
    junk = api.client.get("/healthz", headers={"X-Request-ID": "x" * 500})
    assert junk.headers["X-Request-ID"] != "x" * 500
    for path in ("/healthz", "/metrics", "/nowhere", "/openapi.json"):
        assert api.client.get(path).headers["X-Request-ID"]


def test_unknown_route_and_method_use_the_envelope(api: Api) -> None:
    missing = api.client.get("/v2/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "E_NOT_FOUND"
    wrong = api.call("DELETE", "/v1/jobs", "admin")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "E_METHOD_NOT_ALLOWED"


def test_unexpected_errors_answer_500_with_the_request_id(tmp_path: Path) -> None:
    app = durq.App(f"sqlite:///{tmp_path / 'durq.db'}")
    api = create_app(app)

    @api.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(api, raise_server_exceptions=False) as client:
        response = client.get("/boom", headers={"X-Request-ID": "req-500"})
    assert response.status_code == 500
    error = response.json()["error"]
    assert (error["code"], error["request_id"]) == ("E_INTERNAL", "req-500")
    assert "req-500" in error["message"] and "a bug" not in error["message"]
    app.close()


BAD_SUBMISSIONS: list[tuple[str, dict[str, Any], int, str, list[str]]] = [
    (
        "malformed JSON",
        {"content": b'{"task": "add",', "headers": {"Content-Type": "application/json"}},
        400,
        "E_BAD_JSON",
        ["not valid JSON"],
    ),
    ("not an object", {"json": ["add"]}, 422, "E_VALIDATION", ["body"]),
    ("missing task", {"json": {"args": {}}}, 422, "E_VALIDATION", ["body.task", "required"]),
    (
        "unknown fields",
        {"json": {"task": "add", "colour": "red", "size": 1}},
        422,
        "E_VALIDATION",
        ["body.colour: unknown field", "body.size: unknown field"],
    ),
    (
        "string for int",
        {"json": {"task": "add", "priority": "5"}},
        422,
        "E_VALIDATION",
        ["body.priority", "integer"],
    ),
    (
        "list for args",
        {"json": {"task": "add", "args": [1, 2]}},
        422,
        "E_VALIDATION",
        ["body.args", "must be a JSON object"],
    ),
    (
        "bool for delay",
        {"json": {"task": "add", "delay_seconds": True}},
        422,
        "E_VALIDATION",
        ["body.delay_seconds"],
    ),
    (
        "naive run_at",
        {"json": {"task": "add", "run_at": "2030-01-01T00:00:00"}},
        422,
        "E_VALIDATION",
        ["body.run_at", "timezone"],
    ),
    (
        "epoch run_at",
        {"json": {"task": "add", "run_at": 1900000000}},
        422,
        "E_VALIDATION",
        ["body.run_at", "RFC 3339"],
    ),
    (
        "run_at and delay",
        {"json": {"task": "add", "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 1}},
        422,
        "E_VALIDATION",
        ["either run_at or delay"],
    ),
    (
        "bad queue",
        {"json": {"task": "add", "queue": "no spaces"}},
        422,
        "E_VALIDATION",
        ["body.queue"],
    ),
    (
        "unknown mode",
        {"json": {"task": "add", "execution_mode": "later"}},
        422,
        "E_VALIDATION",
        ["body.execution_mode", "'async' or 'sync'"],
    ),
    (
        "zero attempts",
        {"json": {"task": "add", "max_attempts": 0}},
        422,
        "E_VALIDATION",
        ["body.max_attempts", "greater than or equal to 1"],
    ),
    (
        "long idempotency key",
        {"json": {"task": "add"}, "headers": {"Idempotency-Key": "k" * 300}},
        422,
        "E_VALIDATION",
        ["Idempotency-Key"],
    ),
    (
        "oversize body",
        {"json": {"task": "add", "args": {"blob": "x" * 5000}}},
        413,
        "E_PAYLOAD_TOO_LARGE",
        ["DURQ_API_MAX_BODY_BYTES"],
    ),
    (
        "oversize chunked body",
        {
            "content": lambda: iter([b'{"task": "add", "args": {"b": "', b"x" * 5000, b'"}}']),
            "headers": {"Content-Type": "application/json"},
        },
        413,
        "E_PAYLOAD_TOO_LARGE",
        ["over 2048 bytes"],
    ),
]


def test_bad_submissions_are_4xx_with_a_fix_and_write_nothing(
    make_api: Callable[..., Api],
) -> None:
    api = make_api(api_max_body_bytes=2048)
    for case, spec, status, code, phrases in BAD_SUBMISSIONS:
        kwargs = dict(spec)
        headers = {**api.auth("producer"), **kwargs.pop("headers", {})}
        if callable(kwargs.get("content")):  # a generator: sent chunked, no Content-Length
            kwargs["content"] = kwargs["content"]()
        response = api.client.post("/v1/jobs", headers=headers, **kwargs)
        assert response.status_code == status, (case, response.text)
        error = response.json()["error"]
        assert error["code"] == code, (case, error)
        assert error["request_id"] == response.headers["X-Request-ID"]
        for phrase in phrases:
            assert phrase in error["message"], (case, error["message"])
    assert api.job_count() == 0


@pytest.mark.parametrize(
    ("path", "status", "code", "phrase"),
    [
        ("/v1/jobs?cursor=bm90LWEtY3Vyc29y", 400, "E_BAD_CURSOR", "next_cursor"),
        ("/v1/jobs?cursor=%%%", 400, "E_BAD_CURSOR", "omit cursor"),
        ("/v1/keys?cursor=ajox", 400, "E_BAD_CURSOR", "not one this API issued"),
        ("/v1/jobs?state=finished", 422, "E_VALIDATION", "'queued', 'running'"),
        ("/v1/jobs?limit=0", 422, "E_VALIDATION", "query.limit"),
        ("/v1/jobs?created_by=a%00b", 422, "E_VALIDATION", "must not contain NUL"),
        ("/v1/jobs?created_after=yesterday", 422, "E_VALIDATION", "query.created_after"),
        ("/v1/jobs/abc", 422, "E_VALIDATION", "path.job_id"),
        ("/v1/jobs/99999999999999999999", 422, "E_VALIDATION", "path.job_id"),
    ],
)
def test_bad_queries_are_4xx_with_a_fix(
    api: Api, path: str, status: int, code: str, phrase: str
) -> None:
    response = api.call("GET", path, "admin")
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert phrase in response.json()["error"]["message"]


def test_rate_limit_per_key_with_retry_after(make_api: Callable[..., Api]) -> None:
    api = make_api(api_rate_limit_per_second=0.01, api_rate_limit_burst=2)
    statuses = [api.call("GET", "/v1/auth/whoami", "viewer").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    limited = api.call("GET", "/v1/auth/whoami", "viewer")
    assert limited.json()["error"]["code"] == "E_RATE_LIMITED"
    assert int(limited.headers["Retry-After"]) >= 1
    assert api.call("GET", "/v1/auth/whoami", "operator").status_code == 200  # per key


def test_mounted_inside_another_fastapi_app(tmp_path: Path) -> None:
    app = durq.App(f"sqlite:///{tmp_path / 'durq.db'}")
    app.migrate()
    from durq.api.keys import KeyService

    _, key = KeyService(app).create("acme", "viewer")
    main = FastAPI()
    main.mount("/durq", create_app(app))
    with TestClient(main) as client:
        response = client.get("/durq/v1/auth/whoami", headers={"X-API-Key": key})
        assert response.status_code == 200 and response.headers["X-Request-ID"]
        assert client.get("/durq/openapi.json").status_code == 200
        metrics = client.get("/durq/metrics").text
    assert 'route="/v1/auth/whoami"' in metrics
    app.close()


# ---- health ---------------------------------------------------------------------------


def test_readyz_ok(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"data": {"status": "ok"}}
    ready = api.client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["data"] == {"status": "ready", "database": "ok", "migrations": "current"}


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])  # bound, never listening: connections are refused


def test_readyz_says_when_the_database_is_unreachable(closed_port: int) -> None:
    app = durq.App(f"postgresql://durq@127.0.0.1:{closed_port}/durq")
    with TestClient(create_app(app)) as client:
        response = client.get("/readyz")
        metrics = client.get("/metrics")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "E_DATABASE_UNAVAILABLE" and "unreachable" in error["message"]
    assert metrics.status_code == 200 and "durq_database_up 0.0" in metrics.text
    assert client.get("/healthz").status_code == 200  # alive all the same


def test_readyz_says_when_migrations_are_pending(tmp_path: Path) -> None:
    app = durq.App(f"sqlite:///{tmp_path / 'fresh.db'}")
    with TestClient(create_app(app)) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "E_SCHEMA_OUT_OF_DATE" and "durq migrate" in error["message"]
        app.migrate()
        assert client.get("/readyz").status_code == 200
    app.close()
