"""No secret ever reaches output: a password in the database URL, an API key, the internal
token, a key-encryption key and a job secret are planted, every CLI command and every HTTP
route is exercised (successes and refusals, at DEBUG level with JSON logs), and all that
was printed, logged and answered is searched for them.

PostgreSQL only: it is the backend whose URL carries a password (the server trusts local
connections, so any password opens it).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import warnings
from typing import Any

import pytest
from typer.testing import CliRunner

import durq
from durq.api import create_app
from durq.api.keys import KeyService
from durq.cli.main import app as cli
from durq.settings import Settings

with warnings.catch_warnings():  # starlette suggests httpx2; httpx is what durq ships with
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from .conftest import Api
from .test_access import ROUTES, fill

PASSWORD = "pw-PLANTED-7f3a9c41"
INTERNAL = "tok-PLANTED-51be0d77"
JOB_SECRET = "sk-PLANTED-c0ffee99"
KEK = base64.b64encode(b"PLANTED-kek-32-bytes-of-key-data").decode()


def planted_url(pg_url: str) -> str:
    return re.sub(r"://([^:@/]+)@", rf"://\1:{PASSWORD}@", pg_url, count=1)


def test_no_secret_in_any_output_of_cli_or_http(
    pg_url: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = planted_url(pg_url)
    assert PASSWORD in url
    env = {
        "DURQ_DATABASE_URL": url,
        "DURQ_API_INTERNAL_TOKEN": INTERNAL,
        "DURQ_SECRET_KEKS": json.dumps({"k1": KEK}),
        "DURQ_SECRET_ACTIVE_KEK": "k1",
        "DURQ_LOG_LEVEL": "DEBUG",
        "DURQ_LOG_FORMAT": "json",
    }
    settings = Settings(
        database_url=url,
        api_internal_token=INTERNAL,
        secret_keks={"k1": KEK},
        secret_active_kek="k1",
        api_rate_limit_per_second=0,
    )
    app = durq.App(settings=settings)
    key_id, api_key = (lambda k: (k[0].id, k[1]))(KeyService(app).create("acme", "admin"))
    secrets = [PASSWORD, INTERNAL, JOB_SECRET, KEK, api_key]
    job = app.enqueue("use_secret", {}, secrets={"token": JOB_SECRET}, created_by="acme")
    seen: list[str] = []

    def run(*args: str) -> None:
        result = CliRunner().invoke(cli, list(args), env=env)
        command = " ".join(args).replace(url, "$DURQ_DATABASE_URL")  # our own words
        seen.append(f"$ durq {command}\n{result.output}\n{result.exception!r}")

    run("migrate")
    run("worker", "--once", "--app", "tests.api.secret_app:app")
    assert app.get_job(job.id).state == "succeeded", seen[-1]
    run("enqueue", "use_secret", "--args", "{}", "--app", "tests.api.secret_app:app")
    run("enqueue", "use_secret", "--args", "{", "--json")  # a usage error
    for command in (
        ["jobs", "list"],
        ["jobs", "show", str(job.id)],
        ["jobs", "show", str(job.id), "--json"],
        ["jobs", "cancel", str(job.id)],
        ["jobs", "requeue", str(job.id)],
        ["jobs", "show", "987654"],
        ["queues"],
        ["queues", "pause", "default"],
        ["queues", "resume", "default"],
        ["workers"],
        ["keys", "list"],
        ["keys", "disable", "key_0000000000000000"],
        ["breakers", "list"],
        ["breakers", "reset", "no-such-key"],
        ["alerts"],
        ["alerts", "ack", "987654"],
        ["events", "list", "--job", str(job.id)],
        ["events", "show", "00000000-0000-0000-0000-000000000000"],
        ["events", "redeliver", "00000000-0000-0000-0000-000000000000"],
        ["secrets", "rotate-kek", "--from", "k1", "--to", "k1"],
        ["worker", "--once", "--app", "tests.api.secret_app:app", "--database-url", url],
    ):
        run(*command)

    client = TestClient(create_app(app), raise_server_exceptions=False)
    api = Api(app, client)
    good = {"X-API-Key": api_key, "X-Internal-Token": INTERNAL}
    bad: list[dict[str, str]] = [
        {},
        {"X-API-Key": api_key[:-2] + "xx"},
        {"Authorization": f"Bearer {api_key}", "X-API-Key": "durq_wrong"},
        {"X-API-Key": api_key, "X-Internal-Token": INTERNAL[:-1]},
    ]
    for route in ROUTES:
        for headers in (good, *bad):
            path, body = fill(api, route)
            response = client.request(route.method, path, headers=headers, json=body)
            seen.append(f"{route} {response.status_code} {response.headers} {response.text}")
    seen.append(json.dumps(client.get("/openapi.json").json()))
    KeyService(app).disable(key_id)
    disabled = client.get("/v1/jobs", headers={"X-API-Key": api_key})
    seen.append(disabled.text)
    client.close()
    app.close()

    captured = capfd.readouterr()
    everything = "\n".join([*seen, captured.out, captured.err, caplog.text, *_records(caplog)])
    assert "durq_" in everything and "***" in everything  # output was there to search
    for secret in secrets:
        assert secret not in everything, f"a planted secret leaked: {secret[:6]}..."


def _records(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Each record's message and extra fields, as a structured log handler would see them."""
    out: list[Any] = []
    for record in caplog.records:
        out.append(repr(record.msg))
        out.append(repr({k: v for k, v in vars(record).items() if k not in {"msg", "args"}}))
    return [str(o) for o in out]
