"""A task that raises, times out, or returns something that is not JSON is recorded with a
clear error, and the worker keeps running."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

import durq

from .support import WorkerProcess

pytestmark = pytest.mark.slow


def test_failing_jobs_are_recorded_and_the_worker_keeps_going(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    order = [
        "raises",
        "too_slow",
        "async_too_slow",
        "own_timeout",
        "async_own_timeout",
        "not_json",
        "exits",
        "ok",
    ]
    jobs = {name: app.enqueue(name, priority=i) for i, name in enumerate(order)}
    worker = spawn("--concurrency", "1", "--max-jobs", str(len(order)))
    assert worker.wait_exit() == 0  # it ran them all, the failures did not stop it

    def final(name: str) -> durq.Job:
        return app.get_job(jobs[name].id)

    raised = final("raises")
    assert (raised.state, raised.last_error_code, raised.last_error) == (
        "dead_letter",
        "RuntimeError",
        "the upstream API answered 500",
    )
    for name in ("too_slow", "async_too_slow"):
        timed_out = final(name)
        assert (timed_out.state, timed_out.last_error_code) == ("dead_letter", "JobTimeout")
        assert timed_out.last_error == f"task {name!r} ran longer than its timeout of 0.3s"
    for name in ("own_timeout", "async_own_timeout"):  # the task's own error, not durq's
        own = final(name)
        assert (own.last_error_code, own.last_error) == (
            "TimeoutError",
            "the upstream read timed out",
        )
    bad = final("not_json")
    assert (bad.state, bad.last_error_code) == ("dead_letter", "result_not_json")
    assert "not JSON-serialisable" in (bad.last_error or "")
    exited = final("exits")
    assert (exited.state, exited.last_error_code) == ("dead_letter", "SystemExit")
    assert final("ok").state == "succeeded"
    for name in order[:-1]:
        (attempt,) = app.attempts(jobs[name].id)
        assert (attempt.outcome, attempt.error_code) == ("failed", final(name).last_error_code)
    # The worker itself never crashed: every line is a structured log line, and the
    # tracebacks it wrote are the failed jobs' own, carried by their dead-letter lines.
    lines = [line for line in worker.log().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert [line for line in lines if not line.startswith(("{", "database:"))] == []
    assert not [r for r in records if "exception" in r]
    dead = [r for r in records if r.get("state") == "dead_letter"]
    assert {r["task"] for r in dead} == set(order[:-1])
    assert all(r["traceback"].startswith("Traceback") for r in dead if r["task"] != "not_json")
