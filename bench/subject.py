"""What every benchmarked queue provides to the workloads.

A subject enqueues from the benchmark process, starts its worker as a subprocess, and
answers how many jobs are not yet recorded as finished. Workloads time these the same way
for every subject.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Endpoints
from .measure import Worker

ALL_WORKLOADS = ("W1", "W2", "W3", "W3x2", "W4", "W5", "W6", "RSS")


@dataclass
class Context:
    endpoints: Endpoints
    tmp: Path
    sink: Path
    extra: dict[str, Any] = field(default_factory=dict)


class Subject(ABC):
    name: str
    backend: str  # "postgresql" | "sqlite"
    family: str  # "durq" | "peer" | "ceiling"
    workloads: frozenset[str] = frozenset(ALL_WORKLOADS)
    config_note: str = ""
    #: A slow subject drains at most this many jobs per run (throughput stays comparable).
    max_jobs: int | None = None
    #: This run's drain rate, set by the runner after W3; W5 offers 80 % of it.
    drain_rate: float | None = None

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def versions(self) -> dict[str, str]:
        return {}

    # ---- life cycle ----------------------------------------------------------------
    @abstractmethod
    def setup(self) -> None:
        """Create a fresh database (or file) with the subject's schema."""

    @abstractmethod
    def teardown(self) -> None: ...

    @abstractmethod
    def reset(self) -> None:
        """Remove every job, so the next run starts on an empty queue."""

    # ---- producing -----------------------------------------------------------------
    @abstractmethod
    def enqueue_single(self, count: int) -> float:
        """Enqueue ``count`` no-op jobs, one per transaction; returns seconds taken."""

    def enqueue_batches(self, count: int, batch: int) -> float:
        """Enqueue ``count`` no-op jobs in batches; returns seconds taken."""
        raise NotImplementedError

    @abstractmethod
    def load(self, count: int) -> None:
        """Make ``count`` no-op jobs ready at once, in as few transactions as possible."""

    @abstractmethod
    def probe(self, stamps: list[float]) -> None:
        """Enqueue one probe job per stamp in one transaction (``t`` = the stamp)."""

    # ---- consuming -----------------------------------------------------------------
    @abstractmethod
    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker: ...

    @abstractmethod
    def unfinished(self) -> int:
        """Jobs not yet recorded as finished (0 means the queue is drained)."""

    def retain_finished(self, count: int) -> None:
        """Insert ``count`` finished jobs (with their history) that stay in the table."""
        raise NotImplementedError

    # ---- helpers ---------------------------------------------------------------------
    def warm(self, worker: Worker, timeout: float = 60.0) -> None:
        """Run one job through the worker so that it is connected and idle."""
        self.load(1)
        deadline = time.perf_counter() + timeout
        while self.unfinished():
            worker.check()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{self.name}: the worker did not run a warm-up job")
            time.sleep(0.01)
        time.sleep(0.2)  # let the worker settle back into its idle wait
