"""HTTP-level promises of the document: Allow on OPTIONS and 405, query values given once,
unparseable requests answered with the error envelope (by the ASGI app and by the real
server in front of it), and /metrics behind a key when DURQ_METRICS_AUTH says so."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
import uvicorn

from durq.api import create_app
from durq.api.server import EnvelopeH11Protocol

from ..waiting import wait_until
from .conftest import Api, build_api
from .test_serve import free_port


@pytest.fixture
def web(sqlite_url: str) -> Iterator[Api]:
    """The HTTP layer does not depend on the backend: one (SQLite) is enough here."""
    api = build_api(sqlite_url)
    yield api
    api.close()


ALLOWED = {
    "/v1/jobs": "GET, HEAD, OPTIONS, POST",
    "/v1/jobs/7": "GET, HEAD, OPTIONS",
    "/v1/jobs/7/cancel": "OPTIONS, POST",
    "/v1/keys": "GET, HEAD, OPTIONS, POST",
    "/v1/keys/key_0123456789abcdef": "DELETE, OPTIONS",
    "/healthz": "GET, HEAD, OPTIONS",
}


def test_options_and_405_name_every_allowed_method(web: Api) -> None:
    api = web
    for path, allowed in ALLOWED.items():
        options = api.client.options(path)
        assert (options.status_code, options.headers["allow"]) == (204, allowed), path
        assert options.content == b""
        wrong = api.call("PATCH", path, "admin")
        assert wrong.status_code == 405, path
        assert wrong.headers["allow"] == allowed
        assert wrong.json()["error"]["code"] == "E_METHOD_NOT_ALLOWED"
        assert allowed in wrong.json()["error"]["message"]
    assert api.client.options("/v1/nowhere").status_code == 404


def test_repeated_query_values_are_refused_unless_documented_as_arrays(web: Api) -> None:
    api = web
    api.submit()
    twice = api.call("GET", "/v1/jobs?limit=1&limit=2", "viewer")
    assert twice.status_code == 422, twice.text
    error = twice.json()["error"]
    assert (error["code"], error["details"][0]["loc"]) == ("E_VALIDATION", "query.limit")
    assert "more than once" in error["message"]
    states = api.call("GET", "/v1/jobs?state=queued&state=running", "viewer")
    assert states.status_code == 200 and len(states.json()["data"]) == 1


def test_negative_content_length_gets_the_envelope_from_the_app(web: Api) -> None:
    api = web
    response = api.call(
        "POST", "/v1/jobs", "producer", headers={"Content-Length": "-1"}, content=b""
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "E_BAD_REQUEST"


@pytest.fixture
def real_server(sqlite_url: str) -> Iterator[int]:
    """The API under uvicorn with durq's protocol, as ``durq serve`` runs it."""
    api = build_api(sqlite_url)
    port = free_port()
    config = uvicorn.Config(
        create_app(api.app), port=port, http=EnvelopeH11Protocol, log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=20, what="uvicorn to start")
    yield port
    server.should_exit = True
    thread.join(20)
    api.close()


def raw_request(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def test_negative_content_length_gets_the_envelope_from_the_server(real_server: int) -> None:
    status, headers, body = raw_request(
        real_server, b"POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n"
    )
    assert status == 400 and headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "E_BAD_REQUEST" and "Content-Length" in error["message"]
    assert error["request_id"] == headers["x-request-id"]


def test_metrics_need_a_key_when_configured(sqlite_url: str) -> None:
    closed = build_api(sqlite_url, metrics_auth=True)
    refused = closed.client.get("/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "E_UNAUTHENTICATED"
    allowed = closed.call("GET", "/metrics", "viewer")
    assert allowed.status_code == 200 and "durq_" in allowed.text
    closed.close()
    opened = build_api(sqlite_url)
    assert opened.client.get("/metrics").status_code == 200  # open by default
    opened.close()
