"""A succeeded attempt is stored on its job row, yet every read returns it as the attempt
record it used to be stored as: the Python API, the HTTP API and ``durq jobs show`` agree,
field by field, with the record each attempt wrote."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from typer.testing import CliRunner

import durq
from durq.cli.main import app as cli

from .conftest import Api

runner = CliRunner()
#: The task sleeps this long, so its runtime is known to a range.
NAP = 0.05


class Between:
    """Equal to a number in [low, high]: a measured runtime."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def __eq__(self, other: object) -> bool:
        return isinstance(other, int) and self.low <= other <= self.high

    def __hash__(self) -> int:
        return hash((self.low, self.high))

    def __repr__(self) -> str:
        return f"between({self.low}, {self.high})"


class Holding:
    """Equal to a string that holds ``text``: a formatted traceback."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.text in other

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"holding({self.text!r})"


RUNTIME = Between(int(NAP * 1000), 10_000)


def _tasks(app: durq.App) -> None:
    calls = {"flaky_once": 0}

    @app.task(name="flaky_once", max_attempts=3, retry=durq.Fixed([0]))
    def flaky_once() -> str:
        time.sleep(NAP)
        calls["flaky_once"] += 1
        if calls["flaky_once"] == 1:
            raise ConnectionError("upstream down")
        return "ok"

    @app.task(name="counted", pass_context=True, max_attempts=1)
    def counted(ctx: durq.JobContext) -> None:
        time.sleep(NAP)
        ctx.report(processed=12, failed=3, summary="3 bad rows")

    @app.task(name="plain", max_attempts=1)
    def plain() -> int:
        time.sleep(NAP)
        return 1


def _record(job: durq.Job, **facts: Any) -> dict[str, Any]:
    """The record an attempt of ``job`` (as the attempt left it) wrote."""
    record: dict[str, Any] = {
        "job_id": job.id,
        "attempt": job.attempt,
        "claim_version": job.claim_version,
        "worker_id": job.worker_id,
        "started_at": job.attempted_at,
        "finished_at": job.finished_at,
        "runtime_ms": RUNTIME,
        "outcome": "succeeded",
        "error_code": None,
        "error_message": None,
        "processed": None,
        "failed": None,
        "summary": None,
        "traceback": None,
    }
    return record | facts


def _as_values(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON records with their times read back as datetimes."""
    return [
        {
            k: datetime.fromisoformat(v) if k.endswith("_at") and v is not None else v
            for k, v in r.items()
        }
        for r in records
    ]


def _read_everywhere(api: Api, db_url: str, job_id: int) -> dict[str, list[dict[str, Any]]]:
    python = [a.to_dict() for a in api.app.attempts(job_id)]
    response = api.call("GET", f"/v1/jobs/{job_id}/attempts", "operator")
    assert response.status_code == 200, response.text
    shown = runner.invoke(cli, ["jobs", "show", str(job_id), "--json", "--database-url", db_url])
    assert shown.exit_code == 0, shown.output
    return {
        "python": _as_values(python),
        "http": _as_values(response.json()["data"]),
        "cli": _as_values(json.loads(shown.stdout)["attempts"]),
    }


def test_attempt_records_of_succeeded_jobs_read_alike_everywhere(
    make_api: Callable[..., Api], db_url: str
) -> None:
    api = make_api(tasks=False)
    app = api.app
    _tasks(app)

    retried = app.enqueue("flaky_once", {})
    after_failure = app.run_job(retried.id, worker_id="w-one")
    after_success = app.run_job(retried.id, worker_id="w-two")
    assert (after_failure.state, after_success.state) == ("retry_wait", "succeeded")
    reported = app.run_job(app.enqueue("counted", {}).id, worker_id="w-three")
    plain = app.run_job(app.enqueue("plain", {}).id, worker_id="w-four")
    assert (reported.state, plain.state) == ("succeeded", "succeeded")

    expected = {
        retried.id: [
            _record(
                after_failure,
                # A retry leaves finished_at unset; the attempt ended when the row was written.
                finished_at=after_failure.updated_at,
                outcome="failed",
                error_code="ConnectionError",
                error_message="upstream down",
                traceback=Holding("ConnectionError: upstream down"),
            ),
            _record(after_success),
        ],
        reported.id: [_record(reported, processed=12, failed=3, summary="3 bad rows")],
        plain.id: [_record(plain)],
    }
    assert [r["worker_id"] for r in expected[retried.id]] == ["w-one", "w-two"]
    for job_id, records in expected.items():
        for surface, found in _read_everywhere(api, db_url, job_id).items():
            assert found == records, f"job {job_id} through {surface}"


def test_requeue_of_a_succeeded_job_keeps_its_history(
    make_api: Callable[..., Api], db_url: str
) -> None:
    api = make_api(tasks=False)
    app = api.app
    _tasks(app)
    first = app.run_job(app.enqueue("plain", {}).id, worker_id="w-first")
    response = api.call("POST", f"/v1/jobs/{first.id}/requeue", "operator")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["state"] == "queued"
    second = app.run_job(first.id, worker_id="w-second")
    assert (second.state, second.claim_version, second.attempt) == ("succeeded", 2, 1)

    expected = [_record(first), _record(second)]
    assert [r["worker_id"] for r in expected] == ["w-first", "w-second"]
    for surface, found in _read_everywhere(api, db_url, first.id).items():
        assert found == expected, surface
