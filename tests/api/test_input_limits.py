"""Bad input is refused the same way at every entry: HTTP, the Python API and the CLI.

One table of bad enqueue requests; each is sent over HTTP (status and error code), to
``App.enqueue`` (``ValidationError``) and to ``durq enqueue`` (exit 2, one line, no
traceback), and every answer must name what was wrong. The limits are the settings
``DURQ_MAX_ARGS_BYTES`` and ``DURQ_MAX_JSON_DEPTH`` (small here, so that the tests are).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import durq
from durq.cli.main import app as cli

from .conftest import Api

MAX_ARGS = 2048
MAX_DEPTH = 8
LIMITS = {"max_args_bytes": MAX_ARGS, "max_json_depth": MAX_DEPTH}
TEN_YEARS = 10 * 365 * 24 * 3600


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@dataclass(frozen=True)
class Bad:
    name: str
    says: str  # what every entry's error must mention
    task: str = "add"
    args: Any = field(default_factory=lambda: {"x": 1, "y": 2})
    options: dict[str, Any] = field(default_factory=dict)  # App.enqueue keywords
    raw_json: str | None = None  # for HTTP and the CLI, the args' JSON as text
    http_status: int = 422
    http_code: str = "E_VALIDATION"
    http: bool = True
    cli: list[str] | None = None  # the CLI's flags for the options, if it has them

    def __str__(self) -> str:
        return self.name


CASES = [
    Bad("task name too long", "200", task="t" * 201),
    Bad("task name padded", "task", task=" add"),
    Bad(
        "queue name invalid",
        "queue",
        options={"queue": "bad queue!"},
        cli=["--queue", "bad queue!"],
    ),
    Bad("queue name too long", "queue", options={"queue": "q" * 65}, cli=["--queue", "q" * 65]),
    Bad(
        "idempotency key too long",
        "255",
        options={"idempotency_key": "k" * 256},
        cli=["--idempotency-key", "k" * 256],
    ),
    Bad(
        "priority over int32",
        "priority",
        options={"priority": 2**31},
        cli=["--priority", str(2**31)],
    ),
    Bad("priority not an integer", "priority", options={"priority": 1.5}),
    Bad(
        "delay over ten years",
        "delay",
        options={"delay": TEN_YEARS + 1},
        cli=["--delay", str(TEN_YEARS + 1)],
    ),
    Bad("delay negative", "delay", options={"delay": -1}),
    Bad("max_attempts zero", "max_attempts", options={"max_attempts": 0}),
    Bad(
        "max_attempts over int32",
        "max_attempts",
        options={"max_attempts": 2**31},
        cli=["--max-attempts", str(2**31)],
    ),
    Bad(
        "run_at and delay both",
        "delay",
        options={"run_at": datetime(2030, 1, 1, tzinfo=UTC), "delay": 5},
    ),
    Bad("run_at before 1970", "1970", options={"run_at": datetime(1900, 1, 1, tzinfo=UTC)}),
    Bad("args over the size limit", "DURQ_MAX_ARGS_BYTES", args={"x": "a" * MAX_ARGS, "y": 1}),
    Bad("args nested too deeply", "DURQ_MAX_JSON_DEPTH", args={"x": nested(MAX_DEPTH + 1), "y": 1}),
    Bad("args with a NUL", "NUL", args={"x": "a\x00b", "y": 1}),
    Bad("args with an integer key", "key", args={"x": {1: "a"}, "y": 1}, http=False),
    Bad("args not an object", "object", args=[1, 2], http_code="E_VALIDATION"),
    Bad(
        "args with a 5,000-digit integer",
        "digits",
        args={"x": 10**4999, "y": 1},
        raw_json='{"x": ' + "9" * 5000 + ', "y": 1}',
        http_status=400,
        http_code="E_BAD_JSON",
    ),
]


def http_request(case: Bad) -> tuple[dict[str, str], bytes]:
    body: dict[str, Any] = {"task": case.task}
    headers = {"Content-Type": "application/json"}
    options = dict(case.options)
    if "idempotency_key" in options:
        headers["Idempotency-Key"] = options.pop("idempotency_key")
    for key, value in options.items():
        name = {"delay": "delay_seconds"}.get(key, key)
        body[name] = value.isoformat() if isinstance(value, datetime) else value
    text = json.dumps(body)
    args = case.raw_json if case.raw_json is not None else json.dumps(case.args)
    return headers, (text[:-1] + ', "args": ' + args + "}").encode()


@pytest.mark.parametrize("case", [c for c in CASES if c.http], ids=str)
def test_http_refuses_bad_input(shared_limits_api: Api, case: Bad) -> None:
    headers, body = http_request(case)
    response = shared_limits_api.call("POST", "/v1/jobs", "producer", headers=headers, content=body)
    assert response.status_code == case.http_status, response.text
    error = response.json()["error"]
    assert error["code"] == case.http_code, error
    if case.http_code == "E_VALIDATION":
        assert case.says.lower() in error["message"].lower(), error


def test_python_api_refuses_bad_input(make_app: Callable[..., durq.App]) -> None:
    app = make_app(**LIMITS)

    @app.task()
    def add(x: Any, y: Any) -> None:
        return None

    for case in CASES:
        with pytest.raises(durq.ValidationError) as refused:
            app.enqueue(case.task, case.args, **case.options)
        assert case.says.lower() in str(refused.value).lower(), (case, refused.value)
    assert app.list_jobs() == []  # nothing was written


def test_cli_refuses_bad_input_with_a_usage_error(db_url: str, tmp_path: Path) -> None:
    env = {"DURQ_DATABASE_URL": db_url, "DURQ_MAX_ARGS_BYTES": str(MAX_ARGS)}
    env["DURQ_MAX_JSON_DEPTH"] = str(MAX_DEPTH)
    for case in CASES:
        if case.options and case.cli is None:
            continue  # the CLI has no flag for it (run_at), or types it (a float priority)
        args = case.raw_json if case.raw_json is not None else json.dumps(case.args, default=str)
        if case.name == "args with an integer key":
            continue  # JSON text has string keys only
        result = CliRunner().invoke(
            cli, ["enqueue", case.task, "--args", args, *(case.cli or [])], env=env
        )
        assert result.exit_code == 2, (case, result.output)
        assert "Traceback" not in result.output
        assert case.says.lower() in result.output.lower(), (case, result.output)
    listed = CliRunner().invoke(cli, ["jobs", "list", "--json"], env=env)
    assert json.loads(listed.stdout) == []


def test_cli_reads_large_args_from_a_file_or_stdin(db_url: str, tmp_path: Path) -> None:
    env = {"DURQ_DATABASE_URL": db_url}
    large = {"blob": "x" * 200_000}  # longer than a command line is comfortable with
    path = tmp_path / "args.json"
    path.write_text(json.dumps(large))
    from_file = CliRunner().invoke(
        cli, ["enqueue", "t", "--args-file", str(path), "--json"], env=env
    )
    assert from_file.exit_code == 0, from_file.output
    from_stdin = CliRunner().invoke(
        cli, ["enqueue", "t", "--args-file", "-", "--json"], input=json.dumps({"n": 7}), env=env
    )
    assert from_stdin.exit_code == 0, from_stdin.output
    app = durq.App(db_url)
    try:
        jobs = sorted(app.list_jobs(), key=lambda j: j.id)
        assert [j.args for j in jobs] == [large, {"n": 7}]
    finally:
        app.close()
    both = CliRunner().invoke(cli, ["enqueue", "t", "--args", "{}", "--args-file", "-"], env=env)
    assert both.exit_code == 2 and "not both" in both.output
    missing = CliRunner().invoke(
        cli, ["enqueue", "t", "--args-file", str(tmp_path / "no")], env=env
    )
    assert missing.exit_code == 2 and "cannot be read" in missing.output


def test_a_result_over_the_limit_fails_its_job(make_app: Callable[..., durq.App]) -> None:
    app = make_app(max_result_bytes=2048)

    @app.task(max_attempts=3)
    def big() -> str:
        return "x" * 5000

    @app.task(max_attempts=3)
    def deep() -> Any:
        return nested(40)

    jobs = [app.enqueue("big"), app.enqueue("deep")]
    app.work()
    big_job, deep_job = (app.get_job(j.id) for j in jobs)
    assert (big_job.state, big_job.last_error_code) == ("dead_letter", "result_too_large")
    assert "DURQ_MAX_RESULT_BYTES" in (big_job.last_error or "")
    assert big_job.result is None
    assert (deep_job.state, deep_job.last_error_code) == ("dead_letter", "result_not_json")
    assert "DURQ_MAX_JSON_DEPTH" in (deep_job.last_error or "")
