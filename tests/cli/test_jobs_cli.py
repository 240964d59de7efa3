"""`durq migrate` and `durq jobs …` against real databases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import durq
from durq import testing
from durq.cli.main import app as cli

runner = CliRunner()

FIELDS = {
    "id",
    "queue",
    "task",
    "state",
    "stage",
    "attempt",
    "max_attempts",
    "claim_version",
    "worker_id",
    "priority",
    "run_at",
    "created_at",
    "updated_at",
    "finished_at",
    "last_error_code",
    "last_error",
    "result",
}


def durq_cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DURQ_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "durq.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_migrate_applies_then_reports_up_to_date_and_prints_sql(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    first = durq_cli("migrate", url=url)
    assert first.returncode == 0 and "applied migrations [1" in first.stdout
    again = durq_cli("migrate", url=url)
    assert again.returncode == 0 and "up to date" in again.stdout
    ddl = durq_cli("migrate", "--sql", url="postgresql://u:p@localhost/x")
    assert ddl.returncode == 0
    assert "CREATE TABLE durq_jobs" in ddl.stdout and "FOR UPDATE" not in ddl.stdout
    assert "JSONB" in ddl.stdout  # the PostgreSQL dialect's DDL


def test_jobs_list_show_cancel_requeue_json(db_url: str) -> None:
    app = durq.App(db_url)

    @app.task(max_attempts=1)
    def boom() -> None:
        raise ValueError("kaput")

    dead = testing.run_inline(app, boom)
    queued = app.enqueue("later", {"x": 1}, queue="slow", unchecked=True)

    listed = runner.invoke(cli, ["jobs", "list", "--json", "--database-url", db_url])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["id"] for r in rows] == [queued.id, dead.id]
    assert set(rows[0]) >= FIELDS
    assert rows[1]["last_error"] == "kaput" and rows[1]["state"] == "dead_letter"

    only_dead = runner.invoke(
        cli, ["jobs", "list", "--json", "--state", "dead_letter", "--database-url", db_url]
    )
    assert [r["id"] for r in json.loads(only_dead.stdout)] == [dead.id]

    shown = runner.invoke(cli, ["jobs", "show", str(dead.id), "--json", "--database-url", db_url])
    detail = json.loads(shown.stdout)
    assert detail["attempts"][0]["outcome"] == "failed"
    assert detail["attempts"][0]["error_code"] == "ValueError"

    cancelled = runner.invoke(
        cli, ["jobs", "cancel", str(queued.id), "--json", "--database-url", db_url]
    )
    assert json.loads(cancelled.stdout)["state"] == "cancelled"
    requeued = runner.invoke(
        cli, ["jobs", "requeue", str(dead.id), "--json", "--database-url", db_url]
    )
    body = json.loads(requeued.stdout)
    assert (body["state"], body["attempts"], body["idempotent"]) == ("queued", 0, False)
    table = runner.invoke(cli, ["jobs", "list", "--database-url", db_url])
    assert table.exit_code == 0 and "job(s)" in table.stdout
    app.close()


def test_cli_errors_have_exit_codes_and_say_what_to_do(sqlite_url: str) -> None:
    missing = runner.invoke(cli, ["jobs", "show", "999", "--database-url", sqlite_url])
    assert missing.exit_code == 1 and "job 999 does not exist" in missing.output
    bad_state = runner.invoke(
        cli, ["jobs", "list", "--state", "done", "--database-url", sqlite_url]
    )
    assert bad_state.exit_code == 1 and "unknown state 'done'" in bad_state.output
    bad_app = runner.invoke(cli, ["jobs", "list", "--app", "nomodule"])
    assert bad_app.exit_code == 2 and "module:attribute" in bad_app.output
    usage = runner.invoke(cli, ["jobs", "show"])
    assert usage.exit_code == 2


def test_app_option_loads_tasks_and_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    (tmp_path / "myjobs.py").write_text(
        f"import durq\napp = durq.App({url!r})\n@app.task\ndef hello(): return 'hi'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert runner.invoke(cli, ["migrate", "--app", "myjobs:app"]).exit_code == 0
    app = durq.App(url)
    app.enqueue("hello", {})
    listed = runner.invoke(cli, ["jobs", "list", "--json", "--app", "myjobs:app"])
    assert json.loads(listed.stdout)[0]["task"] == "hello"
    app.close()


def test_jobs_list_never_cuts_a_listing_silently(db_url: str) -> None:
    app = durq.App(db_url)

    @app.task(max_attempts=1)
    def boom() -> None:
        raise ValueError("kaput")

    app.enqueue_many([("boom", {}) for _ in range(75)])
    app.work()
    listed = runner.invoke(
        cli, ["jobs", "list", "--state", "dead_letter", "--database-url", db_url]
    )
    assert listed.exit_code == 0, listed.output
    text = " ".join(listed.stdout.split())
    assert "showing 50 of 75 job(s)" in text and "--before-id 26" in text
    rest = runner.invoke(cli, ["jobs", "list", "--before-id", "26", "--database-url", db_url])
    assert "showing 25 of 75 job(s)" in " ".join(rest.stdout.split())
    everything = runner.invoke(cli, ["jobs", "list", "--limit", "100", "--database-url", db_url])
    assert "75 job(s)" in everything.stdout and "showing" not in everything.stdout
    app.close()


def test_jobs_show_prints_the_run_logs(db_url: str) -> None:
    app = durq.App(db_url)

    @app.task(name="sync_window", pass_context=True, max_attempts=1)
    def sync_window(ctx: durq.JobContext) -> None:
        ctx.report(processed=12, failed=3, summary="3 events refused")

    job = testing.run_inline(app, sync_window)
    shown = runner.invoke(
        cli, ["jobs", "show", str(job.id), "--database-url", db_url], env={"COLUMNS": "200"}
    )
    assert shown.exit_code == 0, shown.output
    assert "run logs" in shown.stdout and "3 events refused" in shown.stdout
    row = next(line for line in shown.stdout.splitlines() if "3 events refused" in line)
    assert "12" in row and "succeeded" in row
    detail = json.loads(
        runner.invoke(cli, ["jobs", "show", str(job.id), "--json", "--database-url", db_url]).stdout
    )
    assert (detail["attempts"][0]["processed"], detail["attempts"][0]["failed"]) == (12, 3)
    app.close()
