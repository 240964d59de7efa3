"""Where benchmark tasks report pickup latency: one line-buffered file per process.

A probe job carries ``t`` (the wall clock just before it was enqueued); the task writes
``now - t`` when it starts. Every subject's task does the same, so W4 and W5 measure the
same interval for all of them.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import IO

SINK_ENV = "DURQ_BENCH_SINK"

_lock = threading.Lock()
_files: dict[int, IO[str]] = {}


def record(t0: float | None) -> None:
    if t0 is None:
        return
    latency = time.time() - t0
    directory = os.environ.get(SINK_ENV)
    if not directory:
        return
    pid = os.getpid()
    handle = _files.get(pid)
    if handle is None:
        with _lock:
            handle = _files.get(pid)
            if handle is None:
                path = Path(directory, f"latency-{pid}.txt")
                handle = path.open("a", buffering=1)
                _files[pid] = handle
    handle.write(f"{latency:.6f}\n")


def read(directory: Path) -> list[float]:
    values: list[float] = []
    for path in directory.glob("latency-*.txt"):
        for line in path.read_text().splitlines():
            if line.strip():
                values.append(float(line))
    return values


def clear(directory: Path) -> None:
    # An in-process worker writes through this module's open handles: drop them too, or
    # its next lines would go to the unlinked files.
    with _lock:
        for handle in _files.values():
            handle.close()
        _files.clear()
    for path in directory.glob("latency-*.txt"):
        path.unlink()
