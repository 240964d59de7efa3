"""`durq enqueue`, `durq queues`, `durq workers` and `durq worker`'s own errors: tables for
people, --json for scripts, exit codes 0 ok, 1 failure, 2 usage."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

import durq
from durq.cli.main import app as cli

from ..worker.support import APP, REPO, durq_env, run_cli, running_worker

runner = CliRunner()


def _invoke(db_url: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, [*args, "--database-url", db_url])
    return result.exit_code, result.stdout, result.stderr


def test_enqueue_prints_the_job_and_honours_every_option(db_url: str) -> None:
    code, out, _ = _invoke(
        db_url, "enqueue", "resize", "--args", '{"image_id": 7}', "--queue", "images",
        "--delay", "60", "--priority", "-3", "--max-attempts", "2", "--json",
    )  # fmt: skip
    assert code == 0
    job = json.loads(out)
    assert (job["task"], job["args"], job["queue"], job["state"]) == (
        "resize",
        {"image_id": 7},
        "images",
        "queued",
    )
    assert (job["priority"], job["max_attempts"], job["created"]) == (-3, 2, True)
    code, out, _ = _invoke(db_url, "enqueue", "resize", "--args", '{"image_id": 8}')
    assert code == 0 and "resize" in out and "queued" in out


def test_enqueue_with_an_idempotency_key_returns_the_original_or_fails(db_url: str) -> None:
    args = ("enqueue", "charge", "--args", '{"order": 1}', "--idempotency-key", "k1", "--json")
    first = json.loads(_invoke(db_url, *args)[1])
    code, out, _ = _invoke(db_url, *args)
    assert code == 0
    again = json.loads(out)
    assert (again["id"], again["created"]) == (first["id"], False)
    code, _, err = _invoke(
        db_url, "enqueue", "charge", "--args", '{"order": 2}', "--idempotency-key", "k1"
    )
    assert code == 1 and "E_IDEMPOTENCY_CONFLICT" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--args", "{not json"], "not valid JSON"),
        (["--args", "[1, 2]"], "JSON object"),
        (["--queue", "no spaces allowed"], "invalid queue name"),
    ],
)
def test_enqueue_usage_errors_exit_2(db_url: str, args: list[str], message: str) -> None:
    code, _, err = _invoke(db_url, "enqueue", "resize", *args)
    assert code == 2 and message in err


def test_queues_shows_counts_and_ages_and_pauses(db_url: str) -> None:
    app = durq.App(db_url)
    app.enqueue("a", queue="emails")
    app.enqueue("b", queue="emails")
    app.enqueue("c", queue="images", delay=3600)
    code, out, _ = _invoke(db_url, "queues", "--json")
    assert code == 0
    stats = {queue["name"]: queue for queue in json.loads(out)}
    assert stats["emails"]["counts"]["queued"] == 2 and stats["emails"]["ready"] == 2
    assert stats["images"]["ready"] == 0 and stats["images"]["oldest_age_seconds"] is None
    assert stats["emails"]["oldest_age_seconds"] >= 0

    code, out, _ = _invoke(db_url, "queues")
    assert code == 0 and "emails" in out and "images" in out and "p95" in out

    assert _invoke(db_url, "queues", "pause", "emails")[0] == 0
    assert _queue(db_url, "emails")["paused"] is True
    assert "paused" in _invoke(db_url, "queues")[1]
    assert _invoke(db_url, "queues", "resume", "emails")[0] == 0
    assert _queue(db_url, "emails")["paused"] is False
    app.close()


def _queue(db_url: str, name: str) -> dict[str, Any]:
    (found,) = [q for q in json.loads(_invoke(db_url, "queues", "--json")[1]) if q["name"] == name]
    return dict(found)


def test_workers_lists_live_and_stopped_workers(db_url: str) -> None:
    app = durq.App(db_url)
    with running_worker(app, queues="emails,images", concurrency=3, worker_id="box-1:42"):
        code, out, _ = _invoke(db_url, "workers", "--json")
        assert code == 0
        (live,) = json.loads(out)
        assert (live["id"], live["status"], live["queues"], live["concurrency"]) == (
            "box-1:42",
            "alive",
            ["emails", "images"],
            3,
        )
        assert "box-1:42" in _invoke(db_url, "workers")[1]
    (stopped,) = json.loads(_invoke(db_url, "workers", "--json")[1])
    assert stopped["status"] == "stopped" and stopped["stopped_at"] is not None
    assert json.loads(_invoke(db_url, "workers", "--alive", "--json")[1]) == []
    app.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--app", "no_colon_here"], "module:attribute"),
        (["--app", "tests.worker.nonexistent:app"], "no module named"),
        (["--app", "tests.worker.apps:ap"], "did you mean tests.worker.apps:app"),
        (["--app", "tests.worker.broken_app:app"], "importing the module of --app"),
        (["--app", "json:dumps"], "not a durq.App"),
        (
            ["--app", "tests.worker.apps:app", "--lease-seconds", "5", "--heartbeat-seconds", "5"],
            "must be shorter than lease_seconds",
        ),
        (["--app", "tests.worker.apps:app", "--queues", "bad queue"], "invalid queue name"),
        (["--app", "tests.worker.apps:app", "--concurrency", "0"], "concurrency"),
    ],
)
def test_worker_usage_errors_exit_2(sqlite_url: str, args: list[str], message: str) -> None:
    done = run_cli(sqlite_url, "worker", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_worker_without_a_database_exits_1_and_says_why(tmp_path: object) -> None:
    url = "postgresql://postgres@127.0.0.1:9/nowhere"  # port 9: nothing listens
    done = run_cli(url, "worker", "--app", "tests.worker.apps:app")
    assert done.returncode == 1
    assert "E_DATABASE_UNAVAILABLE" in done.stderr and "***" not in done.stderr


def test_worker_on_an_unmigrated_database_exits_1_with_the_fix(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/empty.db"
    done = run_cli(url, "worker", "--app", "tests.worker.apps:app")
    assert done.returncode == 1 and "durq migrate" in done.stderr


@pytest.mark.parametrize("build", ["python", "binary"])
def test_worker_warns_at_start_when_psycopg_runs_its_pure_python_build(
    pg_url: str, build: str
) -> None:
    app = durq.App(pg_url)
    app.enqueue("sleep_for", {"seconds": 0}, unchecked=True)
    app.close()
    proc = subprocess.run(
        [sys.executable, "-m", "durq.cli.main", "worker", "--app", APP, "--max-jobs", "1"],
        cwd=REPO,
        env=durq_env(pg_url, PSYCOPG_IMPL=build),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    warned = "psycopg runs its pure-Python build" in proc.stderr
    assert warned == (build == "python"), proc.stderr
