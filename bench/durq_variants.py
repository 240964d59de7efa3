"""durq on PostgreSQL with its features switched on, to price them against plain W3, and
with the worker's defaults (no flags), to compare what a newcomer gets out of the box.

* ``durq-pg-breakers``: every job names one of 50 breaker keys (the claim skips paused
  keys; each outcome updates its key in the same statement).
* ``durq-pg-webhooks``: every tenth job carries a webhook URL, so its state changes write
  outbox events that the worker delivers to a local receiver while it drains.
* ``durq-pg-defaults``: ``durq worker --app …`` with no other flag.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from durq import EnqueueRequest

from . import sink
from .durq_subject import APP_SPEC, TASK, DurqPostgres
from .measure import Worker, python

__all__ = ["DurqPostgresBreakers", "DurqPostgresDefaults", "DurqPostgresWebhooks"]

BREAKER_KEYS = 50
WEBHOOK_EVERY = 10


class DurqPostgresBreakers(DurqPostgres):
    name = "durq-pg-breakers"
    workloads = frozenset({"W3"})
    config_note = f"as durq-pg; every job has one of {BREAKER_KEYS} breaker keys"

    def load(self, count: int) -> None:
        with self._loading_connection() as conn:
            for first in range(0, count, 5_000):
                items = [
                    EnqueueRequest(TASK, {"n": i}, breaker_key=f"tenant-{i % BREAKER_KEYS}")
                    for i in range(first, min(count, first + 5_000))
                ]
                self.app.enqueue_many(items, connection=conn, return_jobs=False)
            conn.commit()

    def reset(self) -> None:
        super().reset()
        self.conn.execute("TRUNCATE durq_breakers")


class _Receiver(BaseHTTPRequestHandler):
    # Keep-alive, as any production receiver: under HTTP/1.0 every delivery would open a
    # TCP connection and a server thread in the benchmark's own process.
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class DurqPostgresWebhooks(DurqPostgres):
    name = "durq-pg-webhooks"
    workloads = frozenset({"W3"})
    config_note = (
        f"as durq-pg; one job in {WEBHOOK_EVERY} has a webhook (events delivered while it drains)"
    )

    def setup(self) -> None:
        super().setup()
        self.receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
        self.receiver.daemon_threads = True
        threading.Thread(target=self.receiver.serve_forever, daemon=True).start()
        self.hook = f"http://127.0.0.1:{self.receiver.server_address[1]}/hook"

    def teardown(self) -> None:
        self.receiver.shutdown()
        super().teardown()

    def reset(self) -> None:
        super().reset()
        self.conn.execute("TRUNCATE durq_outbox")

    def load(self, count: int) -> None:
        with self._loading_connection() as conn:
            for first in range(0, count, 5_000):
                items = [
                    EnqueueRequest(TASK, {"n": i}, webhook_url=self.hook)
                    if i % WEBHOOK_EVERY == 0
                    else EnqueueRequest(TASK, {"n": i})
                    for i in range(first, min(count, first + 5_000))
                ]
                self.app.enqueue_many(items, connection=conn, return_jobs=False)
            conn.commit()


class DurqPostgresDefaults(DurqPostgres):
    name = "durq-pg-defaults"
    workloads = frozenset({"W3"})
    config_note = "durq worker --app … with no other flag (the defaults), async no-op task"

    def start_worker(self, *, processes: int = 1, concurrency: int | None = None) -> Worker:
        argv = [python(), "-m", "durq.cli.main", "worker", "--app", APP_SPEC]
        return Worker(argv, {"DURQ_DATABASE_URL": self.url, sink.SINK_ENV: str(self.ctx.sink)})
