"""A real dashboard stack for browser tests: ``durq serve`` and ``durq worker`` processes
on one database, and a headless Chromium driven by Playwright.

Debian's Chromium is used (``/usr/bin/chromium``, or ``DURQ_CHROMIUM``): Playwright's own
browser download needs internet access that test machines lack.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

import durq
from durq.api.keys import KeyService
from durq.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DURQ = [sys.executable, "-m", "durq.cli.main"]
TASKS_APP = "tests.dashboard.tasks_app:app"
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
SCREENSHOTS = ROOT / "docs" / "img"
ROLES = {
    "viewer": ("acme", "viewer"),
    "producer": ("acme", "producer"),
    "operator": ("ops", "operator"),
    "admin": ("root", "admin"),
}


def chromium_path() -> str | None:
    for candidate in (
        os.environ.get("DURQ_CHROMIUM"),
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    url: str  # the dashboard's base URL
    database_url: str
    app: durq.App  # for arranging jobs and checking them: knows no task, enqueues by name
    keys: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def output(self) -> str:
        return "\n".join(
            (p.stdout.read().decode(errors="replace") if p.stdout and p.poll() is not None else "")
            for p in self.procs
        )


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"durq serve exited with {proc.returncode}:\n{out}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # poll interval, not a wait for something to have happened
    raise AssertionError(f"durq serve was not ready at {url} within {timeout} s")


@contextmanager
def running_stack(database_url: str, workdir: Path) -> Iterator[Stack]:
    env = {
        **os.environ,
        "DURQ_DATABASE_URL": database_url,
        "DURQ_API_RATE_LIMIT_PER_SECOND": "0",
        "DURQ_DASHBOARD_REFRESH_SECONDS": "0.5",
        "DURQ_LOG_LEVEL": "WARNING",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    app = durq.App(settings=Settings(database_url=database_url))
    app.migrate()
    keys = KeyService(app)
    port = free_port()
    stack = Stack(f"http://127.0.0.1:{port}/ui", database_url, app)
    for name, (owner, role) in ROLES.items():
        stack.keys[name] = keys.create(owner, role)[1]
    serve = [*DURQ, "serve", "--app", TASKS_APP, "--port", str(port)]
    work = [
        *DURQ,
        "worker",
        "--app",
        TASKS_APP,
        "--queues",
        "default,burst",
        "--poll-interval",
        "0.1",
        "--concurrency",
        "4",
    ]
    try:
        for argv in (serve, work):
            stack.procs.append(
                subprocess.Popen(
                    argv, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
                )
            )
        _wait_ready(stack.procs[0], f"http://127.0.0.1:{port}/readyz")
        yield stack
    finally:
        for proc in stack.procs:
            proc.terminate()
        for proc in stack.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        app.close()
