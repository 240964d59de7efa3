"""Small helpers the recipe's tests share."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.waiting import wait_until

from recipes.nexus_babel.config import DEV_KEYS

__all__ = ["KEYS", "free_port", "headers", "release_fifo", "serving", "submit"]

KEYS = dict(DEV_KEYS)


def headers(role: str) -> dict[str, str]:
    return {"X-Nexus-API-Key": KEYS[role]}


def submit(
    client: TestClient, job_type: str, payload: dict[str, Any] | None = None, **extra: Any
) -> Any:
    body = {"job_type": job_type, "payload": payload or {}} | extra
    response = client.post("/api/v1/jobs/submit", headers=headers("operator"), json=body)
    assert response.status_code in (200, 202), response.text
    return response.json()


def release_fifo(path: Path, text: str, timeout: float = 5.0) -> bool:
    """Write ``text`` to a FIFO's waiting reader; False if nobody opened it in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not path.exists() or not path.is_fifo():
            return False
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            time.sleep(0.02)
            continue
        with contextlib.closing(os.fdopen(fd, "w")) as pipe:
            pipe.write(text)
        return True
    return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` on a real uvicorn server in a thread (lifespan included); its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=30, what="the API server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
