"""Celery with the Redis broker, configured as its "Optimizing" guide advises for many
short tasks: no result backend, a large prefetch multiplier, prefork pool, and the worker
started without gossip, mingle and heartbeat."""

from __future__ import annotations

import time
from importlib.metadata import version
from typing import Any

from .. import sink
from ..measure import Worker, python
from ..subject import Subject


class CeleryPeer(Subject):
    name = "celery-redis"
    backend = "postgresql"  # compared with durq on PostgreSQL (it keeps jobs in Redis)
    family = "peer"
    workloads = frozenset({"W1", "W3", "W3x2", "W4", "W5"})
    max_jobs = 5_000  # under a thousand jobs/s here: keep each run short
    load_is_atomic = False  # sends one message at a time: the clock starts before loading
    config_note = (
        "Redis broker, task_ignore_result, worker_prefetch_multiplier=128, prefork pool with "
        "one child per worker process (-c N), --without-gossip --without-mingle "
        "--without-heartbeat; completions counted with one Redis INCR per task"
    )

    def versions(self) -> dict[str, str]:
        return {"celery": version("celery"), "kombu": version("kombu"), "redis": version("redis")}

    def setup(self) -> None:
        import os

        import redis

        os.environ["DURQ_BENCH_REDIS_URL"] = self.ctx.endpoints.redis_url
        from . import celery_tasks

        self.tasks = celery_tasks
        self.redis = redis.Redis.from_url(self.ctx.endpoints.redis_url)
        self.sent = 0
        self.reset()

    def teardown(self) -> None:
        self.redis.flushdb()
        self.redis.close()

    def reset(self) -> None:
        self.redis.flushdb()  # the benchmark's own Redis database only
        self.sent = 0

    def _send(self, kwargs: dict[str, Any]) -> None:
        self.tasks.bench.apply_async(kwargs=kwargs)
        self.sent += 1

    def enqueue_single(self, count: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            self._send({"n": i})
        return time.perf_counter() - start

    def load(self, count: int) -> None:
        for i in range(count):
            self._send({"n": i})

    def probe(self, stamps: list[float]) -> None:
        for t in stamps:
            self._send({"t": t})

    def unfinished(self) -> int:
        done = int(self.redis.get(self.tasks.DONE_KEY) or 0)
        return max(0, self.sent - done)

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [
            python(),
            "-m",
            "celery",
            "-A",
            "bench.peers.celery_tasks",
            "worker",
            "-P",
            "prefork",
            "-c",
            str(processes),
            "-Q",
            self.tasks.QUEUE,
            "-l",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        return Worker(
            argv,
            {
                sink.SINK_ENV: str(self.ctx.sink),
                "DURQ_BENCH_REDIS_URL": self.ctx.endpoints.redis_url,
            },
        )
