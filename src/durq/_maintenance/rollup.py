"""Roll finished attempts up into ``durq_stats_minutes``: per queue and minute, how many
attempts succeeded, failed (to retry) or dead-lettered, and the p50/p95 pickup latency.

The leader recomputes whole minutes from the attempt records (an index range on their
finish time; a success, stored on its job row, through the jobs' ``(state, finished_at)``
index), so a round that runs twice, or a leader that changed, writes the same rows.
The dashboard's charts read only the small rollup table.
"""

from __future__ import annotations

import math
import time

from .._drivers import Driver

__all__ = ["HISTORY_SECONDS", "run_once"]

#: How far back the first round looks, and how long rollup rows are kept.
HISTORY_SECONDS = 3600
KEEP_SECONDS = 24 * 3600
#: After a minute ends, rounds recompute it for this long more, so an attempt committed a
#: moment after its finish time was read is still counted; then the minute is final.
SETTLE_SECONDS = 15


def run_once(driver: Driver, since: float | None, now: float | None = None) -> float:
    """Recompute every minute from the one holding ``since`` up to now (None: from the
    newest minute already rolled up, at most an hour back); returns where the next round
    starts. The database does the counting, so a round reads a few rows per minute and
    queue however many jobs ran; only the current minute (and the previous one while it
    settles) is read again by the next round."""
    now = time.time() if now is None else now
    if since is None:
        with driver.read() as ex:
            done = driver.stats_minutes_since(ex, int(now - HISTORY_SECONDS))
        since = max((row.minute for row in done), default=now - HISTORY_SECONDS)
    start_minute = math.floor(since / 60) * 60
    with driver.read() as ex:
        rows = driver.stats_rollup(ex, float(start_minute))
    with driver.transaction() as ex:
        driver.stats_minute_upsert(ex, rows)
        driver.stats_minutes_prune(ex, int(now - KEEP_SECONDS))
    current = math.floor(now / 60) * 60
    return float(current - 60 if now - current < SETTLE_SECONDS else current)
