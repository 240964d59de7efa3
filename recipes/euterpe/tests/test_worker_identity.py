"""Seed 003 §2: the worker id comes from ``POD_NAME``, else ``HOSTNAME``, else an id made
when the process boots (a new one for every start)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import durq
from recipes.euterpe import worker_app

from .world import REPO

# One process reads its worker id three times, taking the names away one by one.
SCRIPT = """
import os, durq
from recipes.euterpe import worker_app
app = worker_app()
ids = []
os.environ.update(POD_NAME="euterpe-7f9c", HOSTNAME="node-a")
ids.append(durq.Worker(app).worker_id)
del os.environ["POD_NAME"]
ids.append(durq.Worker(app).worker_id)
del os.environ["HOSTNAME"]
ids.append(durq.Worker(app).worker_id)
app.close()
print(" ".join(ids))
"""


def _worker_ids(sqlite_url: str) -> tuple[list[str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DURQ_", "EUTERPE_"))}
    env |= {"EUTERPE_DATABASE_URL": sqlite_url, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    return out.split(), proc.pid


def test_worker_identity_pod_name_then_hostname_then_boot_id(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pod, host, boot), pid = _worker_ids(sqlite_url)
    assert pod == f"euterpe-7f9c:{pid}"
    assert host == f"node-a:{pid}"
    # this test's own process booted apart from that one: another identity
    monkeypatch.delenv("POD_NAME", raising=False)
    monkeypatch.delenv("HOSTNAME", raising=False)
    monkeypatch.setenv("EUTERPE_DATABASE_URL", sqlite_url)
    app = worker_app()
    here = durq.Worker(app).worker_id
    app.close()
    first, second = boot.removesuffix(f":{pid}"), here.removesuffix(f":{os.getpid()}")
    assert first != second  # a new logical identity per process start
    assert all(len(b.rsplit("-", 1)[1]) == 8 for b in (first, second))
