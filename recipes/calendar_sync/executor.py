"""The pluggable executor a sync job runs, and a fake provider for tests and the demo.

A real deployment plugs in an executor that talks to the calendar providers; the worker
only needs :class:`SyncExecutor`. :class:`FakeProvider` pretends to sync a window: it
"processes" one event per 15 minutes of the window, and fails for the pairs it is told to
fail (``fail_pair``, or ``CALSYNC_FAKE_FAIL_PAIRS`` in a worker process).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

__all__ = ["FakeProvider", "ProviderError", "SyncExecutor", "SyncResult", "SyncWindow"]


@dataclass(frozen=True)
class SyncWindow:
    """What one sync job asks for."""

    job_id: int
    pair_id: str
    connector_id: str
    window_start: datetime
    window_end: datetime
    payload: dict[str, Any]
    attempt: int


@dataclass(frozen=True)
class SyncResult:
    """The run log of a sync: events processed and failed, and a summary (no secrets)."""

    processed: int
    failed: int = 0
    summary: str = ""


class ProviderError(Exception):
    """The provider refused or failed; the job retries with backoff. ``summary`` is what
    the run log and ``last_error`` keep, so it must never hold credentials."""

    def __init__(self, summary: str, *, processed: int = 0, failed: int = 0) -> None:
        super().__init__(summary)
        self.summary = summary
        self.processed = processed
        self.failed = failed


class SyncExecutor(Protocol):
    def sync(self, window: SyncWindow) -> SyncResult:
        """Sync one window; raise :class:`ProviderError` (or any error) to fail it."""
        ...


@dataclass
class FakeProvider:
    """A provider that can be told to fail, per pair or for every pair."""

    failing_pairs: set[str] = field(default_factory=set)
    fail_all: bool = False
    seconds_per_sync: float = 0.0
    calls: list[SyncWindow] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fail_pair(self, pair_id: str) -> None:
        with self._lock:
            self.failing_pairs.add(str(pair_id))

    def heal_pair(self, pair_id: str) -> None:
        with self._lock:
            self.failing_pairs.discard(str(pair_id))

    def sync(self, window: SyncWindow) -> SyncResult:
        with self._lock:
            self.calls.append(window)
            failing = self.fail_all or window.pair_id in self.failing_pairs
        if self.seconds_per_sync:
            time.sleep(self.seconds_per_sync)
        events = max(1, int((window.window_end - window.window_start).total_seconds() // 900))
        if failing:
            raise ProviderError(
                f"provider unavailable for pair {window.pair_id} (HTTP 503)",
                processed=0,
                failed=events,
            )
        return SyncResult(processed=events, failed=0, summary=f"{events} events synced")
