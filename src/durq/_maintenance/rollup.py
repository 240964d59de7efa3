"""Roll finished attempts up into ``durq_stats_minutes``: per queue and minute, how many
attempts succeeded, failed (to retry) or dead-lettered, and the p50/p95 pickup latency.

The leader recomputes whole minutes from the attempt records (an index range on their
finish time), so a round that runs twice, or a leader that changed, writes the same rows.
The dashboard's charts read only the small rollup table.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable

from .._drivers import Driver
from .._drivers.insights import AttemptSample, MinuteStats

__all__ = ["HISTORY_SECONDS", "percentile", "run_once", "summarize"]

#: How far back the first round looks, and how long rollup rows are kept.
HISTORY_SECONDS = 3600
KEEP_SECONDS = 24 * 3600


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (``q`` in 0..1)."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(samples: Iterable[AttemptSample]) -> list[MinuteStats]:
    counts: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    pickups: dict[tuple[int, str], list[float]] = defaultdict(list)
    for s in samples:
        key = (s.minute, s.queue)
        slot = 0 if s.outcome == "succeeded" else 2 if s.outcome == "dead_letter" else 1
        counts[key][slot] += 1
        if s.pickup_s is not None:
            pickups[key].append(max(0.0, s.pickup_s))
    rows = []
    for (minute, queue), (ok, failed, dead) in sorted(counts.items()):
        lat = sorted(pickups.get((minute, queue), []))
        rows.append(
            MinuteStats(
                minute=minute,
                queue=queue,
                succeeded=ok,
                failed=failed,
                dead_letter=dead,
                pickup_p50_ms=round(percentile(lat, 0.5) * 1000) if lat else None,
                pickup_p95_ms=round(percentile(lat, 0.95) * 1000) if lat else None,
            )
        )
    return rows


def run_once(driver: Driver, since: float | None, now: float | None = None) -> float:
    """Recompute every minute from the one holding ``since`` (None: the last hour) up to
    now; returns where the next round starts: the previous minute, so an attempt whose
    transaction committed just after this round read is still counted."""
    now = time.time() if now is None else now
    start = now - HISTORY_SECONDS if since is None else since
    start_minute = math.floor(start / 60) * 60
    with driver.read() as ex:
        samples = driver.stats_attempts_since(ex, float(start_minute))
    rows = summarize(samples)
    with driver.transaction() as ex:
        driver.stats_minute_upsert(ex, rows)
        driver.stats_minutes_prune(ex, int(now - KEEP_SECONDS))
    return float(math.floor((now - 60) / 60) * 60)
