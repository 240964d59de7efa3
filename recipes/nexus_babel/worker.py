"""``python -m recipes.nexus_babel.worker [--once] [--max-jobs N]`` (US-INFRA-09, FR-016…019).

durq's ``Worker`` runs the jobs: it claims under a lease, heartbeats while a task runs,
writes each outcome fenced by its claim, and on SIGTERM or SIGINT stops claiming and lets
the running job finish. Around it this module keeps the seed's behaviour:

- stale leases are recovered by the recipe rather than by durq's maintenance, so every
  recovery leaves its audit event naming the worker that lost the lease (US-INFRA-20):
  once before the first claim, then every poll interval while the worker runs;
- the poll interval is ``max(NEXUS_WORKER_POLL_SECONDS, 0.1)``;
- ``--once`` runs at most one job and ``--max-jobs N`` exits after N;
- a task's exception is only its attempt's outcome and never stops the worker;
- no database at start (EC-09): one clear line naming ``NEXUS_DATABASE_URL``, exit 2.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pydantic
import structlog
from opentelemetry.trace import TracerProvider

import durq
from durq.logs import redact_text

from .config import Settings, get_settings
from .jobs import QUEUE
from .observability import configure_logging
from .platform import Platform, worker_identity

__all__ = ["WorkerRun", "main", "run_worker", "work"]

log = structlog.get_logger("nexus_babel.worker")

#: Exit code when the worker cannot start (bad settings, no database).
CANNOT_START = 2


def run_worker(
    settings: Settings,
    *,
    once: bool = False,
    max_jobs: int | None = None,
    stop: threading.Event | None = None,
    install_signals: bool = False,
    tracer_provider: TracerProvider | None = None,
) -> int:
    """Work until stopped, ``--once`` or ``--max-jobs``; returns how many jobs ran."""
    return work(
        settings,
        once=once,
        max_jobs=max_jobs,
        stop=stop,
        install_signals=install_signals,
        tracer_provider=tracer_provider,
    ).processed


@dataclass(frozen=True, slots=True)
class WorkerRun:
    processed: int
    #: durq's exit code: 1 when an outcome could not be written (the lease lapsed meanwhile)
    exit_code: int


def work(
    settings: Settings,
    *,
    once: bool = False,
    max_jobs: int | None = None,
    stop: threading.Event | None = None,
    install_signals: bool = False,
    tracer_provider: TracerProvider | None = None,
) -> WorkerRun:
    """:func:`run_worker`, with durq's exit code beside the count."""
    stop = stop or threading.Event()
    platform = Platform.build(settings, tracer_provider=tracer_provider)
    try:
        platform.start()  # EC-09: no database fails here, before any claim
        worker_id = worker_identity("worker")
        worker = durq.Worker(
            platform.queue_app,
            queues=[QUEUE],
            concurrency=settings.worker_concurrency,
            poll_interval=settings.worker_poll_interval,
            max_jobs=max_jobs,
            once=once,
            maintenance=False,  # the recipe recovers stale leases itself, with audit events
            deliveries=False,
            worker_id=worker_id,
        )
        _recover(platform, worker_id)
        watcher = threading.Thread(
            target=_watch,
            args=(platform, worker, stop, settings.worker_poll_interval),
            name="nexus-recovery",
            daemon=True,
        )
        watcher.start()
        exit_code = worker.run(install_signals=install_signals)
        watcher.join(10)
    finally:
        platform.close()
    return WorkerRun(sum(worker.outcomes.values()) - worker.released, exit_code)


def _recover(platform: Platform, worker_id: str) -> None:
    try:
        events = platform.job_service.recover_stale_leases(worker_id)
    except Exception as exc:  # FR-019: the database blinked; the next round tries again
        log.warning("stale-lease recovery failed; retrying next poll", error=str(exc))
        return
    for event in events:
        log.warning("recovered a stale lease", **event)


def _watch(platform: Platform, worker: durq.Worker, stop: threading.Event, every: float) -> None:
    """Recover stale leases every poll interval until the worker returns; pass on a stop."""
    while not worker.finished.wait(every):
        if stop.is_set():
            worker.request_stop()
            continue
        _recover(platform, worker.worker_id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.nexus_babel.worker")
    parser.add_argument("--once", action="store_true", help="poll once, run at most one job")
    parser.add_argument("--max-jobs", type=int, default=None, help="exit after N jobs")
    args = parser.parse_args(argv)
    if args.max_jobs is not None and args.max_jobs < 1:
        parser.error("--max-jobs must be >= 1")
    try:
        settings = get_settings()
    except pydantic.ValidationError as exc:
        print(f"nexus_babel worker: invalid settings: {exc}", file=sys.stderr)
        return CANNOT_START
    configure_logging(settings)
    try:
        run = work(settings, once=args.once, max_jobs=args.max_jobs, install_signals=True)
    except durq.DatabaseUnavailable as exc:
        reason = redact_text(str(exc.__cause__ or exc))
        print(
            f"nexus_babel worker: the database is unavailable: {reason}\n"
            f"Check NEXUS_DATABASE_URL ({redact_text(settings.database_url)}): the server "
            "must be running and the database (or the SQLite file's folder) must exist.",
            file=sys.stderr,
        )
        return CANNOT_START
    print(f"processed {run.processed} job(s)", flush=True)
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
