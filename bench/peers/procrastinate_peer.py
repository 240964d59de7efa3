"""Procrastinate with its async psycopg connector and an async task, which its docs
recommend for concurrency; the worker runs with ``concurrency`` > 1 and LISTEN/NOTIFY."""

from __future__ import annotations

import argparse
import os
import time
from importlib.metadata import version
from typing import Any

import psycopg

from .. import pgdb, sink
from ..aio import Loop
from ..measure import Worker, python
from ..subject import Subject

QUEUE = "bench"
CONCURRENCY = 10
URL_ENV = "DURQ_BENCH_PROCRASTINATE_URL"


def make_app(url: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="bench", queue=QUEUE)
    async def bench(n: int = 0, t: float | None = None) -> None:
        sink.record(t)

    return app


class ProcrastinatePeer(Subject):
    name = "procrastinate"
    backend = "postgresql"
    family = "peer"
    workloads = frozenset({"W1", "W2", "W3", "W3x2", "W4", "W5", "RSS"})
    max_jobs = 2_000  # drains at a few hundred jobs/s here: keep each run under a minute
    config_note = (
        f"PsycopgConnector (async), async task, worker concurrency={CONCURRENCY} "
        "(concurrency for RSS as given), listen_notify on; finished jobs kept"
    )

    def versions(self) -> dict[str, str]:
        return {"procrastinate": version("procrastinate")}

    def setup(self) -> None:
        self.url = pgdb.create(self.ctx.endpoints.pg_admin_url, "procrastinate")
        self.loop = Loop()
        self.app = make_app(self.url)
        self.loop.run(self.app.open_async())
        self.loop.run(self.app.schema_manager.apply_schema_async())
        self.task = self.app.tasks["bench"]
        self.conn = psycopg.connect(self.url, autocommit=True)

    def teardown(self) -> None:
        self.loop.run(self.app.close_async())
        self.loop.close()
        self.conn.close()
        pgdb.drop(self.ctx.endpoints.pg_admin_url, self.url)

    def reset(self) -> None:
        self.conn.execute("TRUNCATE procrastinate_jobs CASCADE")

    def enqueue_single(self, count: int) -> float:
        async def go() -> float:
            start = time.perf_counter()
            for i in range(count):
                await self.task.defer_async(n=i)
            return time.perf_counter() - start

        return self.loop.run(go())

    def _batch(self, kwargs: list[dict[str, Any]]) -> None:
        self.loop.run(self.task.batch_defer_async(*kwargs))

    def enqueue_batches(self, count: int, batch: int) -> float:
        start = time.perf_counter()
        for first in range(0, count, batch):
            self._batch([{"n": i} for i in range(first, min(count, first + batch))])
        return time.perf_counter() - start

    def load(self, count: int) -> None:
        self._batch([{"n": i} for i in range(count)])

    def probe(self, stamps: list[float]) -> None:
        if len(stamps) == 1:
            self.loop.run(self.task.defer_async(t=stamps[0]))
        else:
            self._batch([{"t": t} for t in stamps])

    def unfinished(self) -> int:
        row = self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing'))"
        ).fetchone()
        return int(bool(row and row[0]))

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [
            python(),
            "-m",
            "bench.peers.procrastinate_peer",
            "worker",
            self.url,
            str(processes),
            str(concurrency or CONCURRENCY),
        ]
        return Worker(argv, {sink.SINK_ENV: str(self.ctx.sink)})


def _process(url: str, concurrency: int, stop: object) -> None:
    import asyncio

    app = make_app(url)

    async def go() -> None:
        async with app.open_async():
            await app.run_worker_async(queues=[QUEUE], concurrency=concurrency)

    asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("url")
    parser.add_argument("processes", type=int)
    parser.add_argument("concurrency", type=int)
    ns = parser.parse_args()
    os.environ[URL_ENV] = ns.url
    if ns.processes <= 1:
        _process(ns.url, ns.concurrency, None)
        return
    from ..procs import run_processes

    run_processes(_process, (ns.url, ns.concurrency), ns.processes)


if __name__ == "__main__":
    main()
