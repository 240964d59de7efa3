"""A timeline of one worker process, for :mod:`bench.loop_stall`: when its event loop sat
waiting in ``select()`` for something to do, and when a claim was in flight.

Imported by :mod:`bench.durq_tasks` when ``DURQ_BENCH_TIMELINE`` names a directory; the
worker then writes ``timeline-<pid>.json`` there as it exits. Both wrappers only take a
``perf_counter()`` on each side of the call they wrap.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import threading
import time
from pathlib import Path
from typing import Any

from durq._worker.producer import Producer

__all__ = ["install"]

_selects: list[tuple[float, float]] = []
_claims: list[tuple[float, float, int]] = []


def install(directory: str) -> None:
    loop_thread = threading.main_thread().ident
    select = selectors.EpollSelector.select
    threaded = not hasattr(Producer, "_claim_now")  # durq before its event-loop claims
    claim: Any = Producer._claim if threaded else Producer._claim_now

    def timed_select(self: Any, timeout: float | None = None) -> Any:
        if threading.get_ident() != loop_thread:
            return select(self, timeout)
        started = time.perf_counter()
        try:
            return select(self, timeout)
        finally:
            _selects.append((started, time.perf_counter()))

    def timed_thread_claim(self: Producer, limit: int) -> Any:
        started = time.perf_counter()
        jobs = claim(self, limit)
        _claims.append((started, time.perf_counter(), len(jobs)))
        return jobs

    async def timed_claim(self: Producer, limit: int) -> Any:
        started = time.perf_counter()
        jobs = await claim(self, limit)
        _claims.append((started, time.perf_counter(), len(jobs)))
        return jobs

    selectors.EpollSelector.select = timed_select  # type: ignore[method-assign]
    if threaded:
        Producer._claim = timed_thread_claim  # type: ignore[method-assign]
    else:
        Producer._claim_now = timed_claim  # type: ignore[method-assign]

    def write() -> None:
        path = Path(directory) / f"timeline-{os.getpid()}.json"
        path.write_text(json.dumps({"selects": _selects, "claims": _claims}))

    atexit.register(write)
