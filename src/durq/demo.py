"""``durq demo``: durq's main job, end to end, on SQLite with no server.

A pool of workers starts in this process; ~5,000 jobs of a realistic mix arrive in waves
(most succeed; some fail and retry on a fixed schedule; some dead-letter; some are
scheduled a few seconds out; one idempotent duplicate is refused). Live progress per
queue, then a summary: throughput, retries, dead letters, pickup latency. The database
stays behind for ``durq jobs list``, ``durq queues`` and ``durq workers``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._worker.runner import Worker
from .app import App, EnqueueRequest
from .retry import Fail, Fixed
from .settings import Settings
from .task import JobContext
from .types import TERMINAL_STATES, nearest_rank

__all__ = ["build_demo_app", "demo_requests", "run_demo"]

QUEUES = ("emails", "images", "webhooks", "reports")
#: Jobs arrive in this many waves, one every WAVE_GAP seconds, like traffic would.
WAVES = 50
WAVE_GAP = 0.1


def build_demo_app(database_url: str) -> App:
    # NORMAL is crash-safe in WAL mode (a power cut may lose the last commits): fine here.
    app = App(settings=Settings(database_url=database_url, sqlite_synchronous="NORMAL"))

    @app.task(queue="emails", retry=Fixed([1, 2]), max_attempts=3, pass_context=True)
    async def send_email(ctx: JobContext, to: str, failures: int = 0) -> dict[str, Any]:
        await asyncio.sleep(0.002)  # the SMTP round trip
        if ctx.attempt <= failures:
            raise ConnectionError(f"SMTP server refused {to} (simulated, attempt {ctx.attempt})")
        return {"sent_to": to}

    @app.task(queue="images", max_attempts=2)
    def resize(image_id: int, width: int, broken: bool = False) -> dict[str, Any]:
        if broken:
            raise Fail("corrupt_image", f"image {image_id} is not a valid PNG")
        digest = hashlib.sha256(f"{image_id}:{width}".encode() * 200).hexdigest()
        return {"image_id": image_id, "width": width, "etag": digest[:16]}

    @app.task(queue="webhooks", retry=Fixed([1]), max_attempts=2, pass_context=True)
    async def deliver_webhook(ctx: JobContext, url: str, down: bool = False) -> dict[str, Any]:
        await asyncio.sleep(0.003)
        if down:
            raise TimeoutError(f"{url} did not answer (simulated)")
        return {"url": url, "status": 200}

    @app.task(queue="reports")
    def nightly_report(day: str) -> dict[str, Any]:
        time.sleep(0.01)
        return {"day": day, "rows": 42}

    return app


def demo_requests(total: int, rng: random.Random) -> list[EnqueueRequest]:
    """The mix: 55 % emails (5 % fail once then succeed, 1 % never), 30 % images (2 % are
    corrupt: dead letter at once), 12 % webhooks (3 % of endpoints down: retried, then
    dead), 3 % reports scheduled 1-4 s out."""
    requests: list[EnqueueRequest] = []
    for i in range(total):
        roll = rng.random()
        if roll < 0.55:
            failures = 1 if rng.random() < 0.05 else (9 if rng.random() < 0.01 else 0)
            requests.append(
                EnqueueRequest("send_email", {"to": f"user{i}@example.com", "failures": failures})
            )
        elif roll < 0.85:
            requests.append(
                EnqueueRequest(
                    "resize", {"image_id": i, "width": 640, "broken": rng.random() < 0.02}
                )
            )
        elif roll < 0.97:
            requests.append(
                EnqueueRequest(
                    "deliver_webhook",
                    {"url": f"https://hooks.example.com/{i % 50}", "down": rng.random() < 0.03},
                )
            )
        else:
            requests.append(
                EnqueueRequest(
                    "nightly_report",
                    {"day": f"2026-11-{i % 28 + 1:02d}"},
                    delay=round(rng.uniform(1, 4), 2),
                )
            )
    return requests


def run_demo(
    database_url: str,
    total: int,
    console: Console | None = None,
    *,
    workers: int = 2,
    concurrency: int = 16,
) -> dict[str, Any]:
    console = console or Console()
    if database_url.startswith("sqlite:///"):
        path = Path(database_url[len("sqlite:///") :])
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    app = build_demo_app(database_url)
    app.migrate()
    # Seeded demo data, not a secret: the standard generator is right here.
    requests = demo_requests(total, random.Random(7))  # nosec B311
    per_queue = {q: 0 for q in QUEUES}
    for req in requests:
        per_queue[app.tasks[str(req.task)].queue] += 1
    per_queue["reports"] += 1  # the idempotent summary report below

    pool = [
        Worker(
            app,
            concurrency=concurrency,
            poll_interval=0.5,
            heartbeat_seconds=2,
            lease_seconds=30,
            worker_id=f"demo-{n}",
            prune_interval=3600,
        )
        for n in range(workers)
    ]
    threads = [
        threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True) for w in pool
    ]
    for thread in threads:
        thread.start()
    for worker in pool:
        worker.ready.wait(30)

    console.print(
        f"[bold]durq demo[/]: {total:,} jobs arriving over {WAVES * WAVE_GAP:g}s, {workers} "
        f"workers x {concurrency} concurrent, database {database_url}",
        soft_wrap=True,
    )
    started = time.perf_counter()
    first = app.enqueue("nightly_report", {"day": "summary"}, idempotency_key="demo-summary")
    again = app.enqueue("nightly_report", {"day": "summary"}, idempotency_key="demo-summary")
    duplicate_refused = first.id == again.id
    try:
        _watch(app, console, requests, per_queue)
    finally:
        for worker in pool:
            worker.request_stop()
        for thread in threads:
            thread.join(60)
    elapsed = time.perf_counter() - started

    summary = _summarise(app, elapsed, duplicate_refused, first.id)
    _print_summary(console, summary, database_url)
    app.close()
    return summary


def _watch(
    app: App, console: Console, requests: list[EnqueueRequest], per_queue: dict[str, int]
) -> None:
    """Enqueue the waves and draw progress per queue until every job is finished."""
    columns = (
        TextColumn("{task.description:>9}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[yellow]{task.fields[retrying]:>4} retrying"),
        TextColumn("[red]{task.fields[dead]:>4} dead"),
        TimeElapsedColumn(),
    )
    wave = -(-len(requests) // WAVES)
    next_wave, sent = time.perf_counter(), 0
    with Progress(*columns, console=console) as progress:
        bars = {q: progress.add_task(q, total=per_queue[q], retrying=0, dead=0) for q in QUEUES}
        while True:
            if sent < len(requests) and time.perf_counter() >= next_wave:
                app.enqueue_many(requests[sent : sent + wave])
                sent += wave
                next_wave += WAVE_GAP
            stats = app.queue_stats()
            active = 0
            for q in QUEUES:
                counts = stats.get(q, {}).get("counts", {})
                done = sum(counts.get(str(s), 0) for s in TERMINAL_STATES)
                progress.update(
                    bars[q],
                    completed=done,
                    retrying=counts.get("retry_wait", 0),
                    dead=counts.get("dead_letter", 0),
                )
                active += sum(counts.get(s, 0) for s in ("queued", "running", "retry_wait"))
            if sent >= len(requests) and active == 0:
                return
            time.sleep(0.1)


def _summarise(
    app: App, elapsed: float, duplicate_refused: bool, summary_job: int
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for stats in app.queue_stats().values():
        for state, n in stats["counts"].items():
            counts[state] = counts.get(state, 0) + n
    with app.driver.read() as ex:
        pickups = sorted(max(0.0, float(r["pickup_s"])) for r in ex.run("pickup_latencies", {}))
        attempts = ex.run("attempt_counts", {})[0]
        busiest = ex.run("attempts_busiest_second", {})
    jobs = sum(counts.values())
    total_attempts = int(attempts["attempts"] or 0)

    def pct(fraction: float) -> float | None:
        return round(pickups[nearest_rank(len(pickups), fraction)] * 1000, 1) if pickups else None

    return {
        "jobs": jobs,
        "succeeded": counts.get("succeeded", 0),
        "dead_letter": counts.get("dead_letter", 0),
        "attempts": total_attempts,
        "retries": int(attempts["retries"] or 0),
        "elapsed_s": round(elapsed, 2),
        "throughput_jobs_s": round(jobs / elapsed, 1) if elapsed else None,
        "throughput_attempts_s": round(total_attempts / elapsed, 1) if elapsed else None,
        "busiest_second": int(busiest[0]["n"]) if busiest else 0,
        "pickup_p50_ms": pct(0.50),
        "pickup_p99_ms": pct(0.99),
        "duplicate_refused": duplicate_refused,
        "summary_job": summary_job,
    }


LABELS = {
    "jobs": "jobs",
    "succeeded": "succeeded",
    "dead_letter": "dead letters",
    "retries": "retries (attempts after the first)",
    "throughput_jobs_s": "throughput (jobs/s, whole run)",
    "throughput_attempts_s": "throughput (attempts/s, whole run)",
    "busiest_second": "attempts finished in the busiest second",
    "pickup_p50_ms": "pickup latency p50 (ms)",
    "pickup_p99_ms": "pickup latency p99 (ms)",
    "elapsed_s": "elapsed (s, incl. retry and schedule waits)",
    "duplicate_refused": "idempotent duplicate refused",
}


def _print_summary(console: Console, s: dict[str, Any], url: str) -> None:
    table = Table(title="durq demo summary")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in LABELS.items():
        value = s[key]
        if key == "duplicate_refused":
            value = f"yes (job {s['summary_job']} returned)" if value else "NO"
        elif isinstance(value, int) and not isinstance(value, bool):
            value = f"{value:,}"
        table.add_row(label, str(value))
    console.print(table)
    durq = cli_path()
    hints = (
        "Pickup latency: from when a job was due to when a worker started it (last attempt).",
        "Inspect the database:",
        f"  {durq} jobs list --database-url {url} --state dead_letter",
        f"  {durq} queues --database-url {url}",
        f"  {durq} workers --database-url {url}",
        "See it in the HTTP API (docs at http://127.0.0.1:8000/docs) and the dashboard:",
        f"  DURQ_ENV=dev {durq} serve --database-url {url}",
        "  then open http://127.0.0.1:8000/ui/ and sign in with the API key dev-operator-key",
        "  (DURQ_ENV=dev creates development keys; elsewhere use `durq keys create`).",
    )
    for line in hints:
        console.print(line, soft_wrap=True, highlight=False)


def cli_path() -> str:
    """``durq`` if the shell finds it, else the path of the one beside this Python (a
    virtualenv that is not activated, as after ``make demo``)."""
    if shutil.which("durq"):
        return "durq"
    beside = Path(sys.executable).parent / "durq"
    return str(beside) if beside.exists() else f"{sys.executable} -m durq.cli.main"
