"""``durq … --json`` prints the same shape the HTTP API answers with, type by type."""

from __future__ import annotations

import json
import warnings
from typing import Any

from typer.testing import CliRunner

import durq
from durq.api import create_app
from durq.api.keys import KeyService
from durq.cli.main import app as cli

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def cli_json(db_url: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json", "--database-url", db_url])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_and_http_print_one_shape_per_type(db_url: str) -> None:
    app = durq.App(db_url)

    @app.task(max_attempts=1)
    def fails() -> None:
        raise RuntimeError("the upstream answered 500")

    job = app.enqueue("fails", created_by="ops")
    app.work()
    key = KeyService(app).create("ops", "operator")[1]
    http = TestClient(create_app(app))
    headers = {"X-API-Key": key}

    def get(path: str) -> Any:
        response = http.get(path, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    shown = cli_json(db_url, "jobs", "show", str(job.id))
    attempts, artifacts = shown.pop("attempts"), shown.pop("artifacts")
    assert shown == get(f"/v1/jobs/{job.id}")
    assert attempts == get(f"/v1/jobs/{job.id}/attempts")
    assert artifacts == get(f"/v1/jobs/{job.id}/artifacts") == []
    assert cli_json(db_url, "jobs", "list") == get("/v1/jobs")
    assert cli_json(db_url, "queues") == get("/v1/queues")
    requeued = cli_json(db_url, "jobs", "requeue", str(job.id))
    assert set(requeued) == set(
        http.post(f"/v1/jobs/{job.id}/requeue", headers=headers).json()["data"]
    )
    http.close()
    app.close()
