"""W1-W6 and worker memory, timed the same way for every subject.

Each function runs one repetition against one subject and returns flat metrics.
Throughput clocks start when the jobs become visible to the worker (after the loading
transaction commits) and stop when the subject reports every job recorded as finished,
polled every 5 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import sink
from .config import Sizes
from .measure import percentile, wait_until
from .subject import Subject

Metrics = dict[str, Any]
DRAIN_TIMEOUT = 900.0


def w1_single_enqueue(s: Subject, sizes: Sizes) -> Metrics:
    s.reset()
    n = sizes.single_enqueue
    out: Metrics = {"jobs_per_s": n / s.enqueue_single(n)}
    insert_only = getattr(s, "enqueue_single_insert_only", None)
    if insert_only is not None:
        s.reset()
        out["insert_only_jobs_per_s"] = n / insert_only(n)
    return out


def w2_batch_enqueue(s: Subject, sizes: Sizes) -> Metrics:
    s.reset()
    n = sizes.batch_enqueue
    return {"jobs_per_s": n / s.enqueue_batches(n, sizes.batch_size)}


def _drain(
    s: Subject,
    count: int,
    *,
    processes: int = 1,
    concurrency: int | None = None,
    before: Callable[[], None] | None = None,
) -> Metrics:
    s.reset()
    if before is not None:
        before()
    worker = s.start_worker(processes=processes, concurrency=concurrency)
    try:
        s.warm(worker)
        started = time.perf_counter()
        s.load(count)
        if getattr(s, "load_is_atomic", True):
            started = time.perf_counter()

        def drained() -> bool:
            worker.check()
            return s.unfinished() == 0

        finished = wait_until(drained, timeout=DRAIN_TIMEOUT, what=f"{s.name} to drain")
        return {
            "jobs_per_s": count / (finished - started),
            "seconds": finished - started,
            "jobs": count,
            "peak_rss_mb": worker.peak_rss_mb(),
        }
    finally:
        worker.stop()


def _capped(s: Subject, count: int) -> int:
    return min(count, s.max_jobs) if s.max_jobs else count


def w3_drain(s: Subject, sizes: Sizes) -> Metrics:
    out = _drain(s, _capped(s, sizes.drain), processes=1)
    s.drain_rate = out["jobs_per_s"] if s.drain_rate is None else s.drain_rate
    return out


def w3_drain_two(s: Subject, sizes: Sizes) -> Metrics:
    return _drain(s, _capped(s, sizes.drain), processes=2)


def w4_latency(s: Subject, sizes: Sizes) -> Metrics:
    s.reset()
    worker = s.start_worker(processes=1)
    try:
        s.warm(worker)
        sink.clear(s.ctx.sink)
        interval = 1.0 / sizes.latency_rate
        start = time.perf_counter()
        for i in range(sizes.latency_jobs):
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            s.probe([time.time()])
        wait_until(lambda: s.unfinished() == 0, timeout=120, what=f"{s.name} probes")
        return _latencies(s, sizes.latency_jobs)
    finally:
        worker.stop()


def _latencies(s: Subject, expected: int) -> Metrics:
    # The last probe's line may land a moment after its completion is recorded.
    deadline = time.perf_counter() + 5
    values = sink.read(s.ctx.sink)
    while len(values) < expected and time.perf_counter() < deadline:
        time.sleep(0.05)
        values = sink.read(s.ctx.sink)
    ms = [v * 1000 for v in values]
    return {
        "p50_ms": percentile(ms, 0.50),
        "p95_ms": percentile(ms, 0.95),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": max(ms) if ms else float("nan"),
        "samples": len(ms),
    }


def w5_steady(s: Subject, sizes: Sizes, batch: int = 10) -> Metrics:
    s.reset()
    worker = s.start_worker(processes=1)
    try:
        s.warm(worker)
        sink.clear(s.ctx.sink)
        # Offer what the subject can take: 80 % of its own drain rate, at most steady_rate.
        rate = sizes.steady_rate
        if s.drain_rate:
            rate = min(rate, 0.8 * s.drain_rate)
        interval = batch / rate
        produced = 0
        start = time.perf_counter()
        end = start + sizes.steady_seconds
        tick = 0
        while time.perf_counter() < end:
            delay = start + tick * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            s.probe([time.time()] * batch)
            produced += batch
            tick += 1
            worker.check()
        produced_at = time.perf_counter()
        finished = wait_until(
            lambda: s.unfinished() == 0, timeout=DRAIN_TIMEOUT, what=f"{s.name} steady drain"
        )
        out = _latencies(s, produced)
        out.update(
            jobs_per_s=produced / (finished - start),
            offered_per_s=rate,
            produced_per_s=produced / (produced_at - start),
            backlog_drain_s=finished - produced_at,
        )
        return out
    finally:
        worker.stop()


def w6_scale(s: Subject, sizes: Sizes) -> Metrics:
    retained = _drain(s, sizes.drain, before=lambda: s.retain_finished(sizes.retained_finished))
    backlog = _drain(s, sizes.backlog)
    return {
        "retained_jobs_per_s": retained["jobs_per_s"],
        "backlog_jobs_per_s": backlog["jobs_per_s"],
        "retained_rows": sizes.retained_finished,
        "backlog_jobs": sizes.backlog,
    }


def worker_memory(s: Subject, sizes: Sizes) -> Metrics:
    out = _drain(s, _capped(s, sizes.rss_jobs), concurrency=sizes.rss_concurrency)
    return {
        "peak_rss_mb": out["peak_rss_mb"],
        "jobs_per_s": out["jobs_per_s"],
        "concurrency": sizes.rss_concurrency,
        "jobs": out["jobs"],
    }


WORKLOADS: dict[str, tuple[str, Callable[[Subject, Sizes], Metrics]]] = {
    "W1": ("single enqueue, one job per transaction (jobs/s)", w1_single_enqueue),
    "W2": ("batch enqueue (jobs/s)", w2_batch_enqueue),
    "W3": ("drain, 1 worker process (jobs/s)", w3_drain),
    "W3x2": ("drain, 2 worker processes (jobs/s)", w3_drain_two),
    "W4": ("pickup latency, idle worker (ms)", w4_latency),
    "W5": ("steady state, producer and worker at once", w5_steady),
    "W6": ("drain with retained finished rows / large backlog (jobs/s)", w6_scale),
    "RSS": ("worker peak RSS draining at concurrency 50 (MB)", worker_memory),
}
