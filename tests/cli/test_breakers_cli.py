"""`durq breakers list|reset` and `durq alerts [ack]` against a real database, both
backends."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import durq
from durq.cli.main import app as cli

runner = CliRunner()


def _open(app: durq.App, key: str) -> None:
    @app.task(name="sync_pair", retry=durq.Fixed([0]), max_attempts=50)
    def sync_pair() -> None:
        raise RuntimeError("provider down")

    for _ in range(6):
        app.enqueue("sync_pair", breaker_key=key)
    app.work(queues=["default"], batch=1)


def test_breakers_list_reset_and_alerts(db_url: str) -> None:
    app = durq.App(db_url)
    app.migrate()
    _open(app, "c1:p1")
    url = ["--database-url", db_url]

    listed = runner.invoke(cli, ["breakers", "list", "--json", *url])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert (row["key"], row["state"], row["consecutive_failures"]) == ("c1:p1", "open", 5)
    human = runner.invoke(cli, ["breakers", "list", *url])
    assert human.exit_code == 0 and "c1:p1" in human.output and "open" in human.output

    alerts = runner.invoke(cli, ["alerts", "--json", *url])
    assert alerts.exit_code == 0, alerts.output
    (alert,) = json.loads(alerts.stdout)
    assert (alert["category"], alert["key"], alert["state"]) == (
        "circuit_breaker",
        "c1:p1",
        "open",
    )
    acked = runner.invoke(cli, ["alerts", "ack", str(alert["id"]), *url])
    assert acked.exit_code == 0, acked.output
    assert app.list_alerts(state="open")[0].acked_at is not None
    unknown = runner.invoke(cli, ["alerts", "ack", str(alert["id"] + 100), *url])
    assert unknown.exit_code == 1 and "does not exist" in unknown.output

    reset = runner.invoke(cli, ["breakers", "reset", "c1:p1", *url])
    assert reset.exit_code == 0 and "closed" in reset.output, reset.output
    assert app.list_breakers()[0].state == "closed"
    assert json.loads(runner.invoke(cli, ["alerts", "--json", *url]).stdout) == []
    resolved = runner.invoke(cli, ["alerts", "--state", "resolved", "--json", *url])
    assert [a["id"] for a in json.loads(resolved.stdout)] == [alert["id"]]
    missing = runner.invoke(cli, ["breakers", "reset", "nope", *url])
    assert missing.exit_code == 1 and "durq breakers list" in missing.output
    bad = runner.invoke(cli, ["alerts", "--state", "bogus", *url])
    assert bad.exit_code == 2
    app.close()
