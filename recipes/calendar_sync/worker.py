"""The sync worker: ``python -m recipes.calendar_sync.worker [--max-jobs N]``.

A durq worker on the ``calendar_sync`` queue with the recipe's executor (the fake provider
unless another is plugged in). Workers on any number of machines share the database:
durq's claim (``FOR UPDATE SKIP LOCKED`` on PostgreSQL) gives each job to one of them.
"""

from __future__ import annotations

import argparse
import sys

import durq

from .config import Settings
from .service import QUEUE, CalendarSync

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.calendar_sync.worker")
    parser.add_argument("--max-jobs", type=int, default=None, help="exit after N outcomes")
    parser.add_argument("--concurrency", type=int, default=None)
    args = parser.parse_args(argv)
    settings = Settings()
    sync = CalendarSync(settings)
    sync.migrate()
    worker = durq.Worker(
        sync.app,
        queues=[QUEUE],
        concurrency=args.concurrency or settings.worker_concurrency,
        poll_interval=settings.worker_poll_seconds,
        max_jobs=args.max_jobs,
    )
    try:
        return worker.run()
    finally:
        sync.close()


if __name__ == "__main__":
    sys.exit(main())
