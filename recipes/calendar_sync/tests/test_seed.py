"""Seed 004 "Seed script": it logs in, keeps the cookie and schedules once per key."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.waiting import wait_until

from recipes.calendar_sync import CalendarSync, Settings

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(db_url: str) -> dict[str, str]:
    return os.environ | {
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "CALSYNC_DATABASE_URL": db_url,
        "CALSYNC_ENVIRONMENT": "test",
    }


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[str]:
    """The recipe's API in a real uvicorn process on a free port."""
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as err:  # a file, never a pipe nobody reads while it runs
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                "recipes.calendar_sync:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            env=_env(db_url),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=30, what="the API server to answer", interval=0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _seed(url: str, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recipes.calendar_sync.seed", "--base-url", url, *args],
        env=_env(db_url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_seed_script_authenticates_and_schedules_once_per_key(server: str, db_url: str) -> None:
    pairs = [str(uuid.uuid4()), str(uuid.uuid4())]
    args = ["--pair", pairs[0], "--pair", pairs[1], "--start", "2025-09-22T09:00:00+00:00"]

    # Without the right password the script gets no session and schedules nothing.
    refused = _seed(server, db_url, *args, "--email", "intruder@example.com")
    assert refused.returncode == 1 and "401" in refused.stderr

    first = _seed(server, db_url, *args)
    again = _seed(server, db_url, *args)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    one = [json.loads(line) for line in first.stdout.splitlines()]
    two = [json.loads(line) for line in again.stdout.splitlines()]
    assert [r["status"] for r in one + two] == [202] * 4
    assert [r["body"]["jobIds"] for r in one] == [r["body"]["jobIds"] for r in two]

    sync = CalendarSync(Settings(database_url=db_url, environment="test"))
    try:
        jobs = sync.jobs(limit=100)
        assert sorted(j.pair_id for j in jobs) == sorted(pairs), "once per Idempotency-Key"
        # Another key (a new run prefix) schedules again.
        third = _seed(server, db_url, *args, "--key-prefix", "rerun")
        assert third.returncode == 0, third.stderr
        assert len(sync.jobs(limit=100)) == 4
    finally:
        sync.close()
