"""``durq deliver``: outbox delivery alone, in a process of its own (``durq worker`` runs
the same service beside its jobs unless ``--no-deliveries``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .._drivers import Driver
from .._engine import http
from .._engine.delivery import DeliveryPolicy
from .._engine.identity import default_worker_id
from .._engine.signing import signer_from_settings
from ..settings import Settings
from .deliverer import Deliverer

__all__ = ["DeliveryWorker", "build_deliverer", "deliverer_for_worker"]

log = logging.getLogger("durq.deliver")

T = TypeVar("T")


def build_deliverer(
    driver: Driver, s: Settings, worker_id: str, db: Callable[..., Any]
) -> Deliverer:
    """The delivery service as the settings describe it."""
    return Deliverer(
        driver,
        worker_id=worker_id,
        db=db,
        signer=signer_from_settings(s),
        policy=DeliveryPolicy.from_settings(s),
        batch_size=s.webhook_batch_size,
        concurrency=s.webhook_concurrency,
        timeout=s.webhook_timeout,
        lease_seconds=s.webhook_lease_seconds,
        poll=(s.webhook_poll_min, max(s.webhook_poll_min, s.webhook_poll_max)),
        listen=s.listen_notify,
    )


def deliverer_for_worker(
    driver: Driver, s: Settings, worker_id: str, db: Callable[..., Any], deliveries: bool
) -> Deliverer | None:
    """The delivery service a job worker runs beside its jobs: none with
    ``--no-deliveries``, and none (said once) where httpx is not installed."""
    if not deliveries:
        return None
    if not http.available():
        log.warning(
            "outbox events are not delivered by this worker: webhook delivery needs httpx (%s)",
            http.INSTALL_HINT,
        )
        return None
    return build_deliverer(driver, s, worker_id, db)


class DeliveryWorker:
    """Delivers outbox events until stopped (SIGTERM/SIGINT or :meth:`request_stop`)."""

    def __init__(self, driver: Driver, settings: Settings, worker_id: str | None = None) -> None:
        self.driver = driver
        self.settings = settings
        self.worker_id = worker_id or default_worker_id()
        self._pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="durq-deliver")
        self.deliverer = build_deliverer(driver, settings, self.worker_id, self._db)
        self.ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def run(self, *, install_signals: bool = True) -> int:
        try:
            return asyncio.run(self._main(install_signals))
        finally:
            self._pool.shutdown(wait=False)

    def request_stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def _main(self, install_signals: bool) -> int:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(sig, self._stop.set)
        self.deliverer.start()
        log.info(
            "delivery worker %s started: batch=%d concurrency=%d",
            self.worker_id,
            self.deliverer.batch_size,
            self.deliverer.concurrency,
        )
        self.ready.set()
        await self._stop.wait()
        await self.deliverer.stop()
        log.info(
            "delivery worker %s stopped (%s; outcomes %s)",
            self.worker_id,
            self.deliverer.summary(),
            dict(self.deliverer.outcomes),
        )
        return 0
