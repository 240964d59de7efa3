"""``durq demo``: durq's main job, end to end, on SQLite with no server.

Enqueues a realistic mix (most jobs succeed, some fail and retry on a schedule, some
dead-letter, some are scheduled a few seconds out, one idempotent duplicate is refused),
works it in this process, shows progress per queue, and ends with a summary.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .app import App, EnqueueRequest
from .retry import Fail, Fixed
from .types import TERMINAL_STATES

__all__ = ["build_demo_app", "run_demo"]


def build_demo_app(database_url: str) -> App:
    app = App(database_url)

    @app.task(queue="emails", retry=Fixed([1, 2]), max_attempts=3)
    def send_email(to: str, flaky: bool = False) -> dict[str, Any]:
        if flaky:
            raise ConnectionError(f"SMTP server refused {to} (simulated)")
        return {"sent_to": to}

    @app.task(queue="images", retry=Fixed([1]), max_attempts=2)
    def resize(image_id: int, width: int, broken: bool = False) -> dict[str, Any]:
        if broken:
            raise Fail("corrupt_image", f"image {image_id} is not a valid PNG")
        return {"image_id": image_id, "width": width, "bytes": width * 37}

    @app.task(queue="reports")
    def nightly_report(day: str) -> dict[str, Any]:
        return {"day": day, "rows": 42}

    _ = (send_email, resize, nightly_report)
    return app


def run_demo(database_url: str, total: int, console: Console | None = None) -> dict[str, Any]:
    console = console or Console()
    if database_url.startswith("sqlite:///"):
        path = Path(database_url[len("sqlite:///") :])
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    app = build_demo_app(database_url)
    app.migrate()
    rng = random.Random(7)

    requests: list[EnqueueRequest] = []
    for i in range(total):
        roll = rng.random()
        if roll < 0.60:
            requests.append(EnqueueRequest("send_email", {"to": f"user{i}@example.com",
                                                          "flaky": rng.random() < 0.05}))
        elif roll < 0.95:
            requests.append(EnqueueRequest("resize", {"image_id": i, "width": 640,
                                                      "broken": rng.random() < 0.02}))
        else:
            requests.append(EnqueueRequest("nightly_report", {"day": f"2026-11-{i % 28 + 1:02d}"},
                                           delay=rng.uniform(1, 3)))
    started = time.perf_counter()
    app.enqueue_many(requests)
    first = app.enqueue("nightly_report", {"day": "summary"}, idempotency_key="demo-summary")
    again = app.enqueue("nightly_report", {"day": "summary"}, idempotency_key="demo-summary")
    duplicate_refused = first.id == again.id
    enqueued = time.perf_counter() - started

    queues = ["emails", "images", "reports"]
    with Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        bars = {q: progress.add_task(q, total=1) for q in queues}
        while True:
            app.work(queues=queues, limit=500, batch=50)
            stats = app.queue_stats()
            active = 0
            for q in queues:
                counts = stats.get(q, {}).get("counts", {})
                done = sum(counts.get(str(s), 0) for s in TERMINAL_STATES)
                progress.update(bars[q], completed=done, total=max(1, sum(counts.values())))
                active += sum(counts.get(s, 0) for s in ("queued", "running", "retry_wait"))
            if active == 0:
                break
            time.sleep(0.05)  # retries and scheduled jobs come due on their own schedule
    elapsed = time.perf_counter() - started

    summary = _summarise(app, elapsed, enqueued, duplicate_refused)
    _print_summary(console, summary, database_url)
    app.close()
    return summary


def _summarise(app: App, elapsed: float, enqueue_s: float, duplicate_refused: bool) -> dict[str, Any]:
    rows = _pickups(app)
    counts: dict[str, int] = {}
    for stats in app.queue_stats().values():
        for state, n in stats["counts"].items():
            counts[state] = counts.get(state, 0) + n
    finished = sum(counts.values())
    return {
        "jobs": finished,
        "succeeded": counts.get("succeeded", 0),
        "dead_letter": counts.get("dead_letter", 0),
        "retries": rows["retries"],
        "elapsed_s": round(elapsed, 2),
        "enqueue_s": round(enqueue_s, 3),
        "throughput_jobs_s": round(finished / elapsed, 1) if elapsed else None,
        "pickup_p50_ms": rows["p50"],
        "pickup_p99_ms": rows["p99"],
        "duplicate_refused": duplicate_refused,
    }


def _pickups(app: App) -> dict[str, Any]:
    """Pickup latency of each job's last attempt (started − due) and the retry count."""
    with app.backend.read() as ex:
        rows = ex.run("pickup_latencies", {})
        retries = int(ex.run("attempt_counts", {})[0]["retries"] or 0)
    lat = sorted(max(0.0, float(r["pickup_s"]) * 1000) for r in rows)

    def pct(p: float) -> float | None:
        if not lat:
            return None
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 1)

    return {"p50": pct(0.50), "p99": pct(0.99), "retries": retries}


def _print_summary(console: Console, s: dict[str, Any], url: str) -> None:
    table = Table(title="durq demo summary")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("jobs", "succeeded", "retries", "dead_letter", "throughput_jobs_s",
                "pickup_p50_ms", "pickup_p99_ms", "elapsed_s", "duplicate_refused"):
        table.add_row(key, str(s[key]))
    console.print(table)
    console.print(f"Inspect it: durq jobs list --database-url {url} --state dead_letter")
