"""A token bucket per API key (US-INFRA-21): 429 with ``Retry-After`` when it is empty."""

from __future__ import annotations

import math
import threading
import time

__all__ = ["RateLimiter"]


class RateLimiter:
    def __init__(self, per_second: float, burst: int) -> None:
        self.per_second = per_second
        self.burst = burst
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key id -> (tokens, at)

    def take(self, key_id: str) -> float:
        """0.0 if the request may go ahead, else the seconds until a token is free."""
        if self.per_second <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(key_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.per_second)
            if tokens >= 1.0:
                self._buckets[key_id] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key_id] = (tokens, now)
            return (1.0 - tokens) / self.per_second

    @staticmethod
    def retry_after_header(wait: float) -> str:
        return str(max(1, math.ceil(wait)))
