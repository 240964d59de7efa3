"""Prometheus metrics: HTTP metrics of this process, job metrics read from the database.

Job-level metrics are not counted in any process: every scrape reads them from the
database, so they are right however many workers and servers run, and every server
answers with the same values. Two consequences for queries:

* scrape several servers → aggregate job metrics with ``max by (...)``, not ``sum``;
* they cover the jobs still stored: pruning finished jobs (``DURQ_PRUNE_*``) lowers them,
  which Prometheus reads as a counter reset.

``durq_jobs_total`` counts jobs by their current state, like a gauge (the conventional
name dashboards expect; it is exposed untyped because a gauge may not end in ``_total``);
``durq_job_duration_seconds`` and ``durq_job_retries_total`` come from the attempt
records. ``durq_breaker_open{key}`` is 1 for a paused breaker key (open or half-open) and 0
for a closed key with failures counted, for at most ``MAX_BREAKER_SERIES`` keys (paused
ones first), so a label set stays bounded however many keys exist; ``durq_breakers_open``
counts every paused key and ``durq_breaker_transitions_total{to="open"}`` how many times
any breaker opened. ``durq_queue_degraded{queue}`` is 1 for a queue over a backlog
guardrail now (the ``degraded`` flag of ``/v1/queues``). HTTP metrics are labelled by
route template, never by raw path or id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from .._drivers import AttemptBucket
from ..app import App
from ..errors import DurqError
from ..keys import Breaker
from ..types import ACTIVE_STATES, JobState
from .buckets import DURATION_BUCKETS, le
from .job_metrics import JobMetricsCollector

__all__ = ["DURATION_BUCKETS", "MAX_BREAKER_SERIES", "DatabaseCollector", "Metrics"]

log = structlog.get_logger("durq.api")

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

DEPTH_STATES = tuple(s.value for s in JobState if s in ACTIVE_STATES)

#: At most this many ``durq_breaker_open{key}`` series per scrape (paused keys first).
MAX_BREAKER_SERIES = 100


class DatabaseCollector(Collector):
    """Collects job metrics with two grouped queries at scrape time."""

    def __init__(self, app: App) -> None:
        self.app = app

    def describe(self) -> list[Metric]:
        return []  # families depend on the data; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "durq_database_up", "1 if this scrape could read the job metrics from the database"
        )
        try:
            backend = self.app.driver
            with backend.read() as ex:
                counts = backend.job_counts(ex)
                buckets = backend.attempt_buckets(ex)
                outbox = backend.outbox_counts(ex)
                latencies = backend.outbox_latencies(ex)
                breakers = backend.breaker_list(ex, failing_only=True, limit=MAX_BREAKER_SERIES)
                paused, opened = backend.breaker_totals(ex)
            health = self.app.queue_stats()
        except DurqError as exc:
            log.warning("metrics_database_error", error=str(exc))
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from _job_families(counts)
        yield from _attempt_families(buckets)
        yield from _delivery_families(outbox, latencies)
        yield from _breaker_families(breakers, paused, opened)
        yield _degraded_family(health)


def _degraded_family(health: dict[str, dict[str, Any]]) -> Metric:
    degraded = GaugeMetricFamily(
        "durq_queue_degraded",
        "1 if the queue is over a backlog guardrail now (p95 age of ready jobs or ready count)",
        labels=["queue"],
    )
    for queue, stats in sorted(health.items()):
        degraded.add_metric([queue], 1 if stats["degraded"] else 0)
    return degraded


def _breaker_families(breakers: list[Breaker], paused: int, opened: int) -> Iterator[Metric]:
    per_key = GaugeMetricFamily(
        "durq_breaker_open",
        "1 if the breaker key is paused (open or half-open), 0 if closed with failures "
        f"counted; at most {MAX_BREAKER_SERIES} keys, paused ones first",
        labels=["key"],
    )
    for b in breakers:
        per_key.add_metric([b.key], 0 if b.paused_until is None else 1)
    total = GaugeMetricFamily("durq_breakers_open", "Breaker keys paused now (open or half-open)")
    total.add_metric([], paused)
    transitions = CounterMetricFamily(
        "durq_breaker_transitions",
        "Breaker transitions by the state entered (times any breaker key opened)",
        labels=["to"],
    )
    transitions.add_metric(["open"], opened)
    yield per_key
    yield total
    yield transitions


def _job_families(counts: list[tuple[str, str, str, int]]) -> Iterator[Metric]:
    # A snapshot that falls as jobs move on: not a counter, and promtool forbids the
    # mandated _total name on a gauge, so it is exposed untyped.
    jobs = UnknownMetricFamily(
        "durq_jobs_total",
        "Stored jobs by queue, task and current state (read from the database)",
        labels=["queue", "task", "state"],
    )
    depth: dict[tuple[str, str], int] = defaultdict(int)
    for queue, task, state, n in counts:
        jobs.add_metric([queue, task, state], n)
        for s in DEPTH_STATES:  # every queue reports every active state, zeros included
            depth[(queue, s)] += n if s == state else 0
    queue_depth = GaugeMetricFamily(
        "durq_queue_depth",
        "Jobs waiting or running per queue: queued, retry_wait, running",
        labels=["queue", "state"],
    )
    for (queue, state), n in sorted(depth.items()):
        queue_depth.add_metric([queue, state], n)
    yield jobs
    yield queue_depth


def _attempt_families(buckets: list[AttemptBucket]) -> Iterator[Metric]:
    per_series: dict[tuple[str, str, str], list[int]] = {}
    sums: dict[tuple[str, str, str], float] = defaultdict(float)
    retries: dict[tuple[str, str], int] = defaultdict(int)
    for b in buckets:
        retries[(b.queue, b.task)] += b.retries
        if b.bucket is None:
            continue  # a lost attempt has no runtime
        empty = [0] * (len(DURATION_BUCKETS) + 1)
        series = per_series.setdefault((b.queue, b.task, b.outcome), empty)
        series[b.bucket] += b.count
        sums[(b.queue, b.task, b.outcome)] += b.runtime_ms / 1000.0
    duration = HistogramMetricFamily(
        "durq_job_duration_seconds",
        "Runtime of stored job attempts by queue, task and outcome",
        labels=["queue", "task", "outcome"],
    )
    for key, counts in sorted(per_series.items()):
        cumulative = 0
        cum_buckets: list[tuple[str, float]] = []
        for bound, n in zip((*DURATION_BUCKETS, float("inf")), counts, strict=True):
            cumulative += n
            cum_buckets.append((le(bound), cumulative))
        duration.add_metric(list(key), cum_buckets, sums[key])
    retry_total = CounterMetricFamily(
        "durq_job_retries",
        "Stored attempts after the first, by queue and task",
        labels=["queue", "task"],
    )
    for (queue, task), n in sorted(retries.items()):
        retry_total.add_metric([queue, task], n)
    yield duration
    yield retry_total


DELIVERY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


def _delivery_families(
    outbox: dict[str, tuple[int, int]], latencies: list[float]
) -> Iterator[Metric]:
    """Webhook deliveries by outcome (from the stored events: each delivered event had one
    successful attempt, every other attempt failed) and delivery latency."""
    delivered, delivered_attempts = outbox.get("delivered", (0, 0))
    dead, dead_attempts = outbox.get("dead_letter", (0, 0))
    _, pending_attempts = outbox.get("pending", (0, 0))
    total = CounterMetricFamily(
        "durq_webhook_deliveries",
        "Webhook delivery attempts by outcome: delivered, failed, dead_letter",
        labels=["outcome"],
    )
    total.add_metric(["delivered"], delivered)
    total.add_metric(["failed"], delivered_attempts - delivered + dead_attempts + pending_attempts)
    total.add_metric(["dead_letter"], dead)
    yield total
    latency = HistogramMetricFamily(
        "durq_webhook_delivery_latency_seconds",
        "Seconds from a state change to its webhook's delivery (latest 10,000 delivered)",
    )
    cum_buckets = [
        (le(bound), sum(1 for s in latencies if s <= bound))
        for bound in (*DELIVERY_BUCKETS, float("inf"))
    ]
    latency.add_metric([], cum_buckets, sum(latencies))
    yield latency


class Metrics:
    """One registry per API instance: this process's HTTP metrics plus the DB collector."""

    def __init__(self, app: App) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.http_requests = Counter(
            "durq_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "durq_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            registry=self.registry,
        )
        self.registry.register(DatabaseCollector(app))
        self.registry.register(JobMetricsCollector(app))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in KNOWN_METHODS else "other"  # clients choose methods
        self.http_requests.labels(method, route, str(status)).inc()
        self.http_duration.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
