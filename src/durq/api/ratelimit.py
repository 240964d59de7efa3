"""Per-key token buckets: ``rate`` requests a second on average, bursts up to ``burst``.

Buckets live in this process: with several server processes each one allows the rate, so
divide ``DURQ_API_RATE_LIMIT_PER_SECOND`` by their number for a cluster-wide limit.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]

MAX_TRACKED_KEYS = 100_000


class RateLimiter:
    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def acquire(self, key: str) -> float:
        """Take one token for ``key``: 0.0 if allowed, else the seconds until one is free."""
        if not self.enabled:
            return 0.0
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                if len(self._buckets) >= MAX_TRACKED_KEYS and key not in self._buckets:
                    self._buckets.clear()  # bounded memory; a full bucket is the default
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate

    @staticmethod
    def retry_after_header(wait: float) -> str:
        return str(max(1, math.ceil(wait)))
