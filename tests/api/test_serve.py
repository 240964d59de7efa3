"""A real ``durq serve`` process on a free port: start, get ready, serve a job, stop."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

import durq

from ..worker.support import worker_processes

ROOT = Path(__file__).resolve().parents[2]
DURQ = [sys.executable, "-m", "durq.cli.main"]
SERVE_APP = "tests.api.serve_app:app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_ready(proc: subprocess.Popen[bytes], url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"durq serve exited with {proc.returncode}:\n{output}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # poll interval, not a wait for something to have happened
    raise AssertionError(f"durq serve was not ready at {url} within {timeout} s")


def test_durq_serve_end_to_end(sqlite_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "DURQ_DATABASE_URL": sqlite_url, "DURQ_ENV": "dev"}
    created = subprocess.run(
        [*DURQ, "keys", "create", "--owner", "smoke", "--role", "producer", "--json"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    )
    key = json.loads(created.stdout)
    assert set(key) == {"id", "key", "owner", "role"} and key["role"] == "producer"

    port = free_port()
    proc = subprocess.Popen(
        [
            *DURQ,
            "serve",
            "--app",
            SERVE_APP,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, f"{base}/readyz")
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key['key']}"}, timeout=40
        ) as client:
            # execution_mode sync waits for a worker: a `durq worker` process runs the job.
            with durq.App(sqlite_url) as app, worker_processes(sqlite_url, tmp_path) as start:
                worker = start("--poll-interval", "0.05", app=SERVE_APP, name="serve-worker")
                worker.wait_ready(app)
                done = client.post(
                    "/v1/jobs",
                    json={"task": "add", "args": {"x": 2, "y": 3}, "execution_mode": "sync"},
                )
            assert done.status_code == 200, done.text
            finished = done.json()["data"]
            assert (finished["state"], finished["result"]) == ("succeeded", 5)
            assert finished["worker_id"] == worker.worker_id  # not the server
            # That worker is gone now: the next job stays queued.
            queued = client.post(
                "/v1/jobs",
                json={"task": "add", "args": {"x": 1, "y": 1}},
                headers={"X-Request-ID": "smoke-1"},
            )
            assert queued.status_code == 202 and queued.headers["X-Request-ID"] == "smoke-1"
            job = client.get(f"/v1/jobs/{queued.json()['data']['id']}").json()["data"]
            assert (job["state"], job["created_by"]) == ("queued", "smoke")
            # DURQ_ENV=dev: the lifespan seeded development keys
            admin = client.get("/v1/auth/whoami", headers={"Authorization": "Bearer dev-admin-key"})
            assert admin.json()["data"]["role"] == "admin"
            assert client.get("/openapi.json").status_code == 200
            assert "durq_http_requests_total" in client.get("/metrics").text
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_durq_serve_in_dev_on_an_unmigrated_database_serves_and_says_why(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    env = {**os.environ, "DURQ_DATABASE_URL": url, "DURQ_ENV": "dev", "DURQ_LOG_FORMAT": "json"}
    port = free_port()
    proc = subprocess.Popen(
        [*DURQ, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, f"{base}/healthz")
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 503
        assert "durq migrate" in ready.json()["error"]["message"]
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0].decode()
    assert "Traceback" not in output, output
    assert "bootstrap_keys_skipped" in output and "durq migrate" in output
