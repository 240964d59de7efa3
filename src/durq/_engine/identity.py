"""Who a worker is: ``POD_NAME`` → ``HOSTNAME`` → an id made at boot, plus the pid."""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["default_worker_id"]

_BOOT_ID = f"{socket.gethostname() or 'host'}-{uuid.uuid4().hex[:8]}"


def default_worker_id() -> str:
    base = os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or _BOOT_ID
    return f"{base}:{os.getpid()}"
