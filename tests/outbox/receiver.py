"""A real webhook receiver for the tests: uvicorn on a free port, verifying every request
with durq.webhooks.verify and deduplicating by event id, as the docs tell receivers to."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response

from durq.webhooks import MemoryNonceStore, WebhookRejected, verify

from ..waiting import wait_until

SECRET = "whsec-test-0123456789"


class Receiver:
    def __init__(self, *, fail_times: int = 0, always_fail: bool = False) -> None:
        self.fail_times = fail_times
        self.always_fail = always_fail
        self.hang = threading.Event()  # set: requests wait until ``release`` is set
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.arrivals: dict[str, list[float]] = {}
        self.first: list[dict[str, Any]] = []  # deduplicated, in order of first receipt
        self.seen: set[str] = set()
        self.duplicates = 0
        self.rejected: list[str] = []
        self.nonces = MemoryNonceStore()
        self.app = FastAPI()
        self.app.post("/hook")(self.hook)

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        try:
            verified = verify(request.headers, body, [SECRET], nonce_store=self.nonces)
        except WebhookRejected as exc:
            self.rejected.append(exc.reason)
            return Response(status_code=401)
        event_id = verified.event_id
        with self.lock:
            self.attempts[event_id] += 1
            self.arrivals.setdefault(event_id, []).append(time.monotonic())
            attempt = self.attempts[event_id]
        if self.hang.is_set():
            while not self.release.is_set():
                await _sleep(0.02)
        if self.always_fail or attempt <= self.fail_times:
            return Response(status_code=503)
        with self.lock:
            if event_id in self.seen:
                self.duplicates += 1
            else:
                self.seen.add(event_id)
                self.first.append(json.loads(body))
        return Response(status_code=200)


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(receiver: Receiver) -> Iterator[str]:
    """The receiver on a real uvicorn server in a thread; its hook URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(receiver.app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, what="the webhook receiver to start")
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        receiver.release.set()
        server.should_exit = True
        thread.join(30)
