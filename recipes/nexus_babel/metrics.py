"""The seed's in-memory JSON metrics (US-INFRA-12) and the Prometheus exposition (US-INFRA-24)."""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["MetricsService", "PrometheusMetrics", "percentile"]


def percentile(values: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class MetricsService:
    """Counters and timing samples kept in this process only (EC-13: lost on restart).

    ``timings`` declares keys up front: each is in every snapshot, reading zeros until its
    first sample (EC-12), so a dashboard sees the key before the traffic.
    """

    def __init__(self, timings: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, float] = defaultdict(float)
        self._timings: dict[str, list[float]] = defaultdict(list)
        for key in timings:
            self._timings[key] = []

    def inc(self, key: str, value: float = 1.0) -> None:
        with self._lock:
            self._counters[key] += value

    def observe(self, key: str, value_ms: float) -> None:
        with self._lock:
            self._timings[key].append(float(value_ms))

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            counters = dict(self._counters)
            timings = {key: list(values) for key, values in self._timings.items()}
        return {
            "counters": counters,
            "timings": {
                key: {
                    "count": len(values),
                    "avg_ms": sum(values) / len(values) if values else 0.0,
                    "p95_ms": percentile(values, 0.95),
                }
                for key, values in timings.items()
            },
        }


class PrometheusMetrics:
    """One registry per platform instance, so two apps in one process never share series."""

    def __init__(self, job_counts: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "nexus_http_requests",
            "HTTP requests by method, route and status",
            ["method", "path", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "nexus_http_request_duration_seconds",
            "HTTP request duration by method and route",
            ["method", "path"],
            registry=self.registry,
        )
        self.jobs_finished = Counter(
            "nexus_jobs_finished",
            "Jobs finished by this process, by job type and final status",
            ["job_type", "status"],
            registry=self.registry,
        )
        queued = Gauge("nexus_jobs_queued", "Jobs waiting to run", registry=self.registry)
        running = Gauge("nexus_jobs_running", "Jobs running now", registry=self.registry)
        # read from the database at scrape time: correct across every API and worker process
        queued.set_function(lambda: float(job_counts().get("queued", 0)))
        running.set_function(lambda: float(job_counts().get("running", 0)))
