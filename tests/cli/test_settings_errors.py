"""Configuration mistakes are named, never silently replaced by defaults, and never shown
with a password or a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from durq.demo import cli_path

ROOT = Path(__file__).resolve().parents[2]


def durq_cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DURQ_")}
    return subprocess.run(
        [sys.executable, "-m", "durq.cli.main", *args],
        cwd=cwd,
        env=clean | {"PYTHONPATH": str(ROOT / "src")} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_misspelled_variable_is_named_with_the_right_one(tmp_path: Path) -> None:
    done = durq_cli("migrate", cwd=tmp_path, DURQ_DATABSE_URL="sqlite:///elsewhere.db")
    assert "DURQ_DATABSE_URL is not a durq setting" in done.stderr
    assert "did you mean DURQ_DATABASE_URL?" in done.stderr
    assert "database: sqlite:///durq.db (from the default" in done.stderr


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"DURQ_CONCURRENCY": "abc"}, "DURQ_CONCURRENCY: Input should be a valid integer"),
        (
            {"DURQ_DATABASE_URL": "postgresql+asyncpg://u:hunter2@db/app"},
            "unsupported database URL scheme 'postgresql+asyncpg'",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    done = durq_cli("jobs", "list", cwd=tmp_path, **env)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_demo_hint_names_a_durq_the_shell_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    hint = cli_path()
    assert hint != "durq"
    assert Path(hint.split()[0]).exists()
