"""`durq keys create|list|disable` against a real database."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import durq
from durq.api.keys import KeyService
from durq.cli.main import app as cli

runner = CliRunner()


def test_keys_create_list_disable(sqlite_url: str) -> None:
    url = ["--database-url", sqlite_url]
    created = runner.invoke(
        cli, ["keys", "create", "--owner", "billing", "--role", "producer", "--json", *url]
    )
    assert created.exit_code == 0, created.output
    key = json.loads(created.stdout)
    assert set(key) == {"id", "key", "owner", "role"}
    assert (key["owner"], key["role"]) == ("billing", "producer")

    human = runner.invoke(cli, ["keys", "create", "--owner", "ops", "--role", "operator", *url])
    assert human.exit_code == 0 and "not shown again" in human.output

    listed = runner.invoke(cli, ["keys", "list", "--json", *url])
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert rows[key["id"]]["owner"] == "billing"
    assert key["key"] not in listed.output  # secrets never listed

    app = durq.App(sqlite_url)
    service = KeyService(app)
    found = service.authenticate(key["key"])
    assert found is not None and not found.disabled
    disabled = runner.invoke(cli, ["keys", "disable", key["id"], *url])
    assert disabled.exit_code == 0, disabled.output
    found = service.authenticate(key["key"])
    assert found is not None and found.disabled
    missing = runner.invoke(cli, ["keys", "disable", "key_missing", *url])
    assert missing.exit_code == 1 and "no API key" in missing.output
    app.close()


def test_keys_create_refuses_unknown_roles(sqlite_url: str) -> None:
    result = runner.invoke(
        cli, ["keys", "create", "--owner", "x", "--role", "root", "--database-url", sqlite_url]
    )
    assert result.exit_code == 2
    assert "viewer, producer, operator, admin" in result.output
