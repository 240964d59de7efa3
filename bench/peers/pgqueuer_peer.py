"""PgQueuer, in the configuration its own benchmark tool documents as fastest: the asyncpg
driver on uvloop, several queue managers in one process; batch size 100 by default."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from importlib.metadata import version

import psycopg

from .. import pgdb, sink
from ..aio import Loop
from ..measure import Worker, python
from ..subject import Subject

ENTRYPOINT = "bench"
CONSUMERS = 5  # queue managers per process, as in PgQueuer's benchmark tool
BATCH = 100


class PgQueuerPeer(Subject):
    name = "pgqueuer"
    backend = "postgresql"
    family = "peer"
    workloads = frozenset({"W1", "W2", "W3", "W3x2", "W4", "W5", "RSS"})
    config_note = (
        f"asyncpg driver + uvloop, {CONSUMERS} QueueManagers per worker process "
        f"(the benchmark tool's default), batch_size={BATCH}; jobs deleted on success"
    )

    def versions(self) -> dict[str, str]:
        return {"pgqueuer": version("pgqueuer"), "asyncpg": version("asyncpg")}

    def setup(self) -> None:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        self.url = pgdb.create(self.ctx.endpoints.pg_admin_url, "pgqueuer")
        self.loop = Loop()
        self.apg = self.loop.run(asyncpg.connect(self.url))
        self.queries = Queries(AsyncpgDriver(self.apg))
        self.loop.run(self.queries.install())
        self.conn = psycopg.connect(self.url, autocommit=True)

    def teardown(self) -> None:
        self.loop.run(self.apg.close())
        self.loop.close()
        self.conn.close()
        pgdb.drop(self.ctx.endpoints.pg_admin_url, self.url)

    def reset(self) -> None:
        self.conn.execute("TRUNCATE pgqueuer, pgqueuer_log")

    def _many(self, payloads: list[bytes]) -> None:
        n = len(payloads)
        self.loop.run(self.queries.enqueue([ENTRYPOINT] * n, list(payloads), [0] * n))

    def enqueue_single(self, count: int) -> float:
        async def go() -> float:
            start = time.perf_counter()
            for i in range(count):
                await self.queries.enqueue(ENTRYPOINT, json.dumps({"n": i}).encode(), 0)
            return time.perf_counter() - start

        return self.loop.run(go())

    def enqueue_batches(self, count: int, batch: int) -> float:
        start = time.perf_counter()
        for first in range(0, count, batch):
            self._many(
                [json.dumps({"n": i}).encode() for i in range(first, min(count, first + batch))]
            )
        return time.perf_counter() - start

    def load(self, count: int) -> None:
        self._many([json.dumps({"n": i}).encode() for i in range(count)])

    def probe(self, stamps: list[float]) -> None:
        if len(stamps) == 1:
            self.loop.run(
                self.queries.enqueue(ENTRYPOINT, json.dumps({"t": stamps[0]}).encode(), 0)
            )
        else:
            self._many([json.dumps({"t": t}).encode() for t in stamps])

    def unfinished(self) -> int:
        row = self.conn.execute("SELECT EXISTS (SELECT 1 FROM pgqueuer)").fetchone()
        return int(bool(row and row[0]))

    consumers = CONSUMERS
    batch = BATCH

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [python(), "-m", "bench.peers.pgqueuer_peer", "worker", self.url, str(processes)]
        argv += ["--consumers", str(self.consumers), "--batch", str(self.batch)]
        return Worker(argv, {sink.SINK_ENV: str(self.ctx.sink)})


class PgQueuerDefaults(PgQueuerPeer):
    """What ``pgq run`` gives without flags: one QueueManager, batch_size 10 (uvloop on)."""

    name = "pgqueuer-defaults"
    workloads = frozenset({"W3"})
    config_note = "PgQueuer's defaults: one QueueManager per process, batch_size=10, uvloop"
    consumers = 1
    batch = 10


async def consume(url: str, consumers: int = CONSUMERS, batch: int = BATCH) -> None:
    import asyncpg
    from pgqueuer import AsyncpgDriver, PgQueuer
    from pgqueuer.models import Job

    managers = []
    for _ in range(consumers):
        pgq = PgQueuer(AsyncpgDriver(await asyncpg.connect(url)))

        @pgq.entrypoint(ENTRYPOINT)
        async def bench(job: Job) -> None:
            if job.payload:
                sink.record(json.loads(job.payload).get("t"))

        managers.append(pgq)

    def stop() -> None:
        for pgq in managers:
            pgq.shutdown.set()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGINT, stop)
    await asyncio.gather(*(pgq.run(batch_size=batch) for pgq in managers))


def _process(url: str, consumers: int, batch: int, stop: object) -> None:
    import uvloop

    uvloop.run(consume(url, consumers, batch))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("url")
    parser.add_argument("processes", type=int)
    parser.add_argument("--consumers", type=int, default=CONSUMERS)
    parser.add_argument("--batch", type=int, default=BATCH)
    ns = parser.parse_args()
    if ns.processes <= 1:
        _process(ns.url, ns.consumers, ns.batch, None)
        return
    from ..procs import run_processes

    run_processes(_process, (ns.url, ns.consumers, ns.batch), ns.processes)


if __name__ == "__main__":
    main()
