"""The Celery app a benchmark worker runs (Redis broker, no result backend)."""

from __future__ import annotations

import os

import redis
from celery import Celery

from .. import sink

REDIS_URL = os.environ.get("DURQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
DONE_KEY = "durq-bench:celery:done"
QUEUE = "bench"

app = Celery("durq_bench", broker=REDIS_URL)
app.conf.update(
    task_ignore_result=True,  # no result backend: nothing to write per task
    worker_prefetch_multiplier=128,  # "Optimizing": large prefetch for many short tasks
    task_acks_late=False,
    worker_disable_rate_limits=True,
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)

_counter: redis.Redis | None = None


@app.task(name="bench")
def bench(n: int = 0, t: float | None = None) -> None:
    global _counter
    sink.record(t)
    if _counter is None:
        _counter = redis.Redis.from_url(REDIS_URL)
    _counter.incr(DONE_KEY)  # Celery records nothing on success: count completions here
