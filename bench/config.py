"""Sizes and endpoints of a benchmark run.

The quick sizes keep a full comparison within minutes on a 2-core machine; ``--full`` uses
the sizes the performance issue names. A results file records which were used.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sizes:
    single_enqueue: int = 2_000  # W1 jobs, one per transaction
    batch_enqueue: int = 50_000  # W2 jobs, in batches of batch_size
    batch_size: int = 1_000
    drain: int = 10_000  # W3 jobs
    latency_jobs: int = 300  # W4 jobs
    latency_rate: float = 50.0  # W4 jobs/s
    steady_seconds: float = 10.0  # W5 duration
    steady_rate: float = 2_000.0  # W5 offered jobs/s
    retained_finished: int = 200_000  # W6 finished rows kept in the table
    backlog: int = 50_000  # W6 backlog drained
    rss_jobs: int = 20_000  # worker memory: jobs drained
    rss_concurrency: int = 50
    runs: int = 3  # repetitions; medians are reported

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


QUICK = Sizes()
FULL = Sizes(
    single_enqueue=10_000,
    batch_enqueue=200_000,
    drain=10_000,
    steady_seconds=30.0,
    retained_finished=1_000_000,
    backlog=200_000,
    rss_jobs=100_000,
)


@dataclass(frozen=True)
class Endpoints:
    """Where the benchmark may create its own databases (never the test ones)."""

    pg_admin_url: str = field(
        default_factory=lambda: os.environ.get(
            "DURQ_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        )
    )
    redis_url: str = field(
        default_factory=lambda: os.environ.get("DURQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
    )
