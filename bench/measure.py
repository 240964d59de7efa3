"""Clocks, percentiles, medians, process memory and subprocess workers."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def median(values: Sequence[float]) -> float:
    clean = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(clean) if clean else math.nan


def wait_until(
    check: Callable[[], bool], *, timeout: float, interval: float = 0.005, what: str = ""
) -> float:
    """Poll ``check`` until true; returns the clock at that moment."""
    deadline = time.perf_counter() + timeout
    while True:
        if check():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what or check}")
        time.sleep(interval)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                found.extend(int(c) for c in text)
    return found


def process_tree(pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(_children(current))
    return tree


def emit(result: dict[str, Any], output: Path | None) -> None:
    """Print a harness's result as JSON, and write it to ``output`` too if given."""
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if output:
        output.write_text(text + "\n")


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of one process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by a process and its descendants."""
    return sum(_cpu_s(member) for member in process_tree(pid))


def postgres_cpu_seconds() -> float:
    """CPU seconds used so far by every process named ``postgres`` on this machine (the
    local server's backends and its background processes)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{entry}/comm").read_text().strip() == "postgres":
                    total += _cpu_s(int(entry))
    return total


def peak_rss_mb(pid: int) -> float:
    """Sum of the peak resident set (VmHWM) of a process and its descendants, in MB."""
    total_kb = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024


class Worker:
    """A worker subprocess of any subject: started, measured, stopped."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        full_env = dict(os.environ)
        full_env.update(env or {})
        # The bench package must be importable by the worker, wherever it was started from.
        root = str(Path(__file__).resolve().parent.parent)
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, full_env.get("PYTHONPATH", "")) if p
        )
        self.log = Path(os.environ.get("DURQ_BENCH_TMP", "/tmp")) / f"durq-bench-{os.getpid()}.log"
        self._log = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check(self) -> None:
        if not self.alive():
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"worker {self.argv} exited with {self.proc.returncode}:\n{tail}")

    def peak_rss_mb(self) -> float:
        return peak_rss_mb(self.pid)

    def stop(self, timeout: float = 15.0) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()


def python() -> str:
    return sys.executable
