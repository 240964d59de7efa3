"""Small helpers the recipe's tests share."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from recipes.nexus_babel.config import DEV_KEYS

__all__ = ["KEYS", "headers", "release_fifo", "submit"]

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
