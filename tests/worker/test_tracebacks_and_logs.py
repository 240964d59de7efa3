"""What an operator needs when a job fails: the traceback stored with the attempt, log
lines at the level the outcome deserves (a retry is a WARNING, a dead letter an ERROR with
its traceback), every line carrying the job's ids, and no secret in any of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

import durq
from durq.api.keys import KeyService
from durq.cli.main import app as cli
from durq.logs import redact_text

from .support import adopt_test_tasks, run_cli, running_worker, wait_until


def failing_app(db_url: str) -> durq.App:
    app = durq.App(db_url)

    def lookup(record: dict[str, Any]) -> Any:
        return record["missing"]

    @app.task(max_attempts=1)
    def fails_in_a_helper() -> None:
        lookup({})

    @app.task(max_attempts=1)
    def says_a_lot() -> None:
        raise ValueError("\n".join(f"line {i}" for i in range(3000)))

    return app


@pytest.mark.parametrize("path", ["worker", "inline"])
def test_a_failed_attempt_stores_its_traceback(db_url: str, path: str) -> None:
    app = failing_app(db_url)
    job = app.enqueue("fails_in_a_helper")
    if path == "worker":  # the completer's batched write
        with running_worker(app, poll_interval=0.05):
            wait_until(lambda: app.get_job(job.id).state == "dead_letter", what="the failure")
    else:  # App.work's single write
        app.work()
    (attempt,) = app.attempts(job.id)
    assert attempt.traceback is not None
    assert attempt.traceback.startswith("Traceback (most recent call last):")
    assert "in lookup" in attempt.traceback and 'return record["missing"]' in attempt.traceback
    assert attempt.traceback.rstrip().endswith("KeyError: 'missing'")
    assert app.get_job(job.id).last_error_code == "KeyError"
    app.close()


def test_a_long_traceback_keeps_its_end_within_16_kb(db_url: str) -> None:
    app = failing_app(db_url)
    job = app.enqueue("says_a_lot")
    app.work()
    (attempt,) = app.attempts(job.id)
    assert attempt.traceback is not None
    assert len(attempt.traceback) <= 16 * 1024
    assert attempt.traceback.startswith("… (earlier frames cut)")
    assert attempt.traceback.rstrip().endswith("line 2999")
    app.close()


def test_jobs_show_prints_the_traceback_end(db_url: str) -> None:
    app = failing_app(db_url)
    job = app.enqueue("fails_in_a_helper")
    app.work()
    shown = CliRunner().invoke(cli, ["jobs", "show", str(job.id), "--database-url", db_url])
    assert shown.exit_code == 0, shown.output
    assert "attempt 1 traceback (end):" in shown.stdout
    assert "KeyError: 'missing'" in shown.stdout
    as_json = CliRunner().invoke(
        cli, ["jobs", "show", str(job.id), "--json", "--database-url", db_url]
    )
    assert json.loads(as_json.stdout)["attempts"][0]["traceback"].startswith("Traceback")
    app.close()


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_worker_logs_retries_as_warnings_and_dead_letters_as_errors(db_url: str) -> None:
    app = adopt_test_tasks(durq.App(db_url))  # the worker's tasks and their settings
    retried = app.enqueue("fails_in_a_helper")
    dead = app.enqueue("raises")
    done = run_cli(
        db_url,
        "worker",
        "--app",
        "tests.worker.apps:app",
        "--max-jobs",
        "2",
        "--log-level",
        "WARNING",
        "--log-format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stderr)
    by_job = {line.get("job_id"): line for line in lines if "job_id" in line}
    warning, error = by_job[retried.id], by_job[dead.id]
    assert warning["level"] == "warning" and "retry_wait" in warning["event"]
    assert error["level"] == "error" and "dead_letter" in error["event"]
    assert "RuntimeError: the upstream API answered 500" in error["traceback"]
    for line in (warning, error):
        assert line["task"] in ("fails_in_a_helper", "raises")
        assert (line["queue"], line["attempt"]) == ("default", 1)
        assert line["worker_id"] and line["timestamp"].endswith("Z")
    assert not [line for line in lines if line["level"] == "info"]  # --log-level WARNING
    app.close()


def test_logs_and_output_never_show_a_password_or_key(pg_url: str, tmp_path: Path) -> None:
    # Trust authentication accepts any password: plant one in the URL and look for it.
    secret_url = pg_url.replace("://postgres@", "://postgres:hunter2-planted@")
    assert "hunter2-planted" in secret_url
    with psycopg.connect(secret_url):
        pass
    app = durq.App(secret_url)
    app.enqueue("raises", unchecked=True)
    key = KeyService(app).create("ops", "operator")[1]
    outputs = [
        run_cli(secret_url, "migrate"),
        run_cli(secret_url, "jobs", "list"),
        run_cli(secret_url, "queues"),
        run_cli(secret_url, "workers"),
        run_cli(secret_url, "keys", "list"),
        run_cli(
            secret_url,
            "worker",
            "--app",
            "tests.worker.apps:app",
            "--once",
            "--log-format",
            "json",
        ),
        run_cli("postgresql+asyncpg://u:hunter2-planted@db/app", "jobs", "list"),
    ]
    for done in outputs:
        text = done.stdout + done.stderr
        assert "hunter2-planted" not in text, text
        assert key not in text
    assert "postgres:***@" in outputs[1].stderr  # the database is named, password hidden
    assert key not in redact_text(f"Authorization: Bearer {key}")
    assert redact_text("Authorization: Bearer abcdefgh12345") == "Authorization: Bearer ***"
    app.close()
    sys.stdout.flush()
