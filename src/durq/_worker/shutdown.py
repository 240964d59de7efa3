"""Graceful shutdown of a worker: signals, the drain of running jobs within
``shutdown_timeout``, the release of the rest once their code has stopped, and closing the
event loop without waiting forever on a task that ignores its cancel."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import TYPE_CHECKING

from ..settings import Settings
from .inflight import InFlightJobs

if TYPE_CHECKING:
    from .executor import Executor

__all__ = ["GracefulShutdown", "close_loop"]

log = logging.getLogger("durq.worker")

#: How long shutdown lets cancelled tasks stop before it says some will not.
CANCEL_GRACE = 0.1
#: How long closing the loop waits for its last tasks to take their cancel.
CLOSE_TIMEOUT = 5.0


class GracefulShutdown:
    """The worker's stop sequence (mixed into :class:`~durq._worker.runner.Worker`)."""

    worker_id: str
    settings: Settings
    inflight: InFlightJobs
    executor: Executor
    left_running: int
    _loop: asyncio.AbstractEventLoop | None
    _stop_event: asyncio.Event
    _stop_requested_at: float | None
    _signals: int

    def _begin_stop(self) -> None:
        if self._stop_requested_at is not None:
            return
        assert self._loop is not None
        self._stop_requested_at = self._loop.time()
        log.info(
            "worker %s stopping: no new claims; waiting up to %gs for %d running job(s)",
            self.worker_id,
            self.settings.shutdown_timeout,
            len(self.inflight.running()),
        )
        self._stop_event.set()
        self.executor.stop_starting()  # prefetched jobs go back at once, for any worker
        self.inflight.changed.fire()

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info(
                "received %s: shutting down gracefully (send it again to exit at once)", sig.name
            )
            self._begin_stop()
            return
        log.warning(
            "received %s again: exiting now; the leases of %d job(s) will expire and another "
            "worker will reclaim them",
            sig.name,
            len(self.inflight),
        )
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        os._exit(1)

    async def _drain(self) -> None:
        """Wait for running jobs (bounded by shutdown_timeout once a stop was asked),
        release the rest, then write every outcome."""
        loop = asyncio.get_running_loop()
        # Without a stop (--max-jobs reached), prefetched jobs still run.
        while self.inflight.running() or (self.executor.accepting and self.inflight.buffered()):
            left: float | None = None
            if self._stop_requested_at is not None:
                left = self._stop_requested_at + self.settings.shutdown_timeout - loop.time()
                if left <= 0:
                    break
            stop_pending = self._stop_requested_at is None
            await self.inflight.changed.wait(left)
            if stop_pending and self._stop_requested_at is not None:
                continue  # a stop arrived: the timeout starts counting now
        if not self.inflight.running():
            return
        self.executor.release_all()
        hard = loop.time() + self.settings.shutdown_hard_timeout
        if await self._stopped_by(loop.time() + CANCEL_GRACE):
            return  # every cancel landed
        log.warning(
            "worker %s: %d job(s) still running after the shutdown timeout; keeping their "
            "leases (heartbeated) until their code stops, for at most %gs more",
            self.worker_id,
            len(self.inflight.running()),
            self.settings.shutdown_hard_timeout,
        )
        if not await self._stopped_by(hard):
            self.left_running = self.executor.leave_running()

    async def _stopped_by(self, deadline: float) -> bool:
        """Wait (heartbeating) until no job's code runs, or ``deadline``; True if none."""
        loop = asyncio.get_running_loop()
        while self.inflight.running():
            left = deadline - loop.time()
            if left <= 0:
                return False
            await self.inflight.changed.wait(left)
        return True


def close_loop(loop: asyncio.AbstractEventLoop, *, wait_for_tasks: bool) -> None:
    """Close the worker's loop like ``asyncio.run``, except that a task left running past
    the hard shutdown deadline is not waited for, nor (briefly bounded) one that ignores
    this last cancel: either would hold the exit forever."""
    try:
        if not wait_for_tasks:
            return
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            done, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_TIMEOUT))
            for task in done:
                if not task.cancelled():
                    task.exception()  # retrieved: the worker already logged what mattered
            if pending:
                log.warning(
                    "%d task(s) ignored the cancel at exit; not waiting for them", len(pending)
                )
                return
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
