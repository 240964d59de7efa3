"""An application's own metric names over its jobs (``App.add_job_metrics``).

:class:`JobMetricsCollector` is a Prometheus collector: ``durq serve`` registers it, and an
application with its own registry can too::

    registry = prometheus_client.CollectorRegistry()
    registry.register(durq.api.JobMetricsCollector(app))

Every scrape reads the figures from the database, like durq's own job metrics.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

import structlog
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .._drivers import AttemptBucket, JobArgCount
from ..app import App
from ..errors import DurqError
from ..jobmetrics import JobMetrics
from ..types import ACTIVE_STATES, JobState
from .buckets import DURATION_BUCKETS, le

__all__ = ["JobMetricsCollector", "job_metric_families"]

log = structlog.get_logger("durq.api")

DEPTH_STATES = tuple(s.value for s in JobState if s in ACTIVE_STATES)


class JobMetricsCollector(Collector):
    """The families of every ``JobMetrics`` the App registered, read at scrape time."""

    def __init__(self, app: App) -> None:
        self.app = app

    def describe(self) -> list[Metric]:
        return []  # the label values depend on the data

    def collect(self) -> Iterator[Metric]:
        if not self.app.job_metrics:
            return
        backend = self.app.driver
        try:
            with backend.read() as ex:
                attempts = backend.attempt_buckets(ex)
                counts = {
                    (m.tasks, task): backend.job_arg_counts(ex, task, _arg(m))
                    for m in self.app.job_metrics
                    for task in m.tasks
                }
        except DurqError as exc:
            log.warning("job_metrics_database_error", error=str(exc))
            return
        for m in self.app.job_metrics:
            rows = [row for task in m.tasks for row in counts[(m.tasks, task)]]
            yield from job_metric_families(m, rows, attempts)


def _arg(m: JobMetrics) -> str:
    return m.arg_labels[0] if m.arg_labels else ""


def job_metric_families(
    m: JobMetrics, rows: Sequence[JobArgCount], attempts: Sequence[AttemptBucket]
) -> Iterator[Metric]:
    arg_labels = list(m.arg_labels)
    totals: dict[tuple[str, ...], int] = defaultdict(int)
    depth: dict[str, int] = {m.state(s): 0 for s in DEPTH_STATES}
    retries: dict[tuple[str, ...], int] = defaultdict(int)
    for row in rows:
        values = (row.label or "",) if arg_labels else ()
        totals[(m.state(row.state), *values)] += row.count
        if row.state in DEPTH_STATES:
            depth[m.state(row.state)] += row.count
        retries[values] += row.retries
    # Counted like durq_jobs_total: a snapshot of stored jobs, exposed as a counter because
    # the name ends in _total (the application chose it).
    jobs = CounterMetricFamily(
        m.jobs_total.removesuffix("_total"),
        f"Stored jobs of {', '.join(m.tasks)} by current {m.state_label}",
        labels=[m.state_label, *arg_labels],
    )
    for key, n in sorted(totals.items()):
        jobs.add_metric(list(key), n)
    queue_depth = GaugeMetricFamily(
        m.queue_depth,
        f"Jobs of {', '.join(m.tasks)} waiting or running, by {m.state_label}",
        labels=[m.state_label],
    )
    for state, n in sorted(depth.items()):
        queue_depth.add_metric([state], n)
    retry_total = CounterMetricFamily(
        m.retries.removesuffix("_total"),
        f"Attempts of {', '.join(m.tasks)} after the first",
        labels=arg_labels,
    )
    for key, n in sorted(retries.items()):
        retry_total.add_metric(list(key), n)
    per_outcome: dict[str, list[int]] = {}
    sums: dict[str, float] = defaultdict(float)
    for b in attempts:
        if b.task not in m.tasks or b.bucket is None:
            continue  # another task's, or a lost attempt with no runtime
        outcome = m.outcome(b.outcome)
        series = per_outcome.setdefault(outcome, [0] * (len(DURATION_BUCKETS) + 1))
        series[b.bucket] += b.count
        sums[outcome] += b.runtime_ms / 1000.0
    duration = HistogramMetricFamily(
        m.duration,
        f"Runtime of stored attempts of {', '.join(m.tasks)} by outcome",
        labels=["outcome"],
    )
    for outcome, per_bucket in sorted(per_outcome.items()):
        cumulative = 0
        cum_buckets: list[tuple[str, float]] = []
        for bound, n in zip((*DURATION_BUCKETS, float("inf")), per_bucket, strict=True):
            cumulative += n
            cum_buckets.append((le(bound), cumulative))
        duration.add_metric([outcome], cum_buckets, sums[outcome])
    yield jobs
    yield queue_depth
    yield duration
    yield retry_total
