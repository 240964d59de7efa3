"""``python -m recipes.nexus_babel.worker [--once] [--max-jobs N]`` (US-INFRA-09, FR-016…019).

The seed's loop, on durq: before each poll recover stale leases (with an audit event), then
claim and run one job through ``App.work``; with nothing ready sleep
``max(NEXUS_WORKER_POLL_SECONDS, 0.1)``. ``--once`` polls once and exits; ``--max-jobs N``
exits after N jobs. A job's exception is recorded by durq as its attempt's outcome and
never stops the loop; SIGTERM or SIGINT stops it after the current job.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from .config import Settings, get_settings
from .jobs import QUEUE
from .platform import Platform, worker_identity

__all__ = ["main", "run_worker"]

log = logging.getLogger("nexus_babel.worker")


def run_worker(
    settings: Settings,
    *,
    once: bool = False,
    max_jobs: int | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Work until stopped, ``--once`` or ``--max-jobs``; returns how many jobs ran."""
    stop = stop or threading.Event()
    platform = Platform.build(settings)
    platform.start()  # EC-09: no database means a clear error here, before any poll
    worker_id = worker_identity("worker")
    processed = 0
    try:
        while not stop.is_set():
            for event in platform.job_service.recover_stale_leases(worker_id):
                log.warning(
                    "recovered job %s from %s: now %s",
                    event["job_id"],
                    event["original_lease_owner"],
                    event["status"],
                )
            try:
                done = platform.queue_app.work(queues=[QUEUE], limit=1, worker_id=worker_id)
            except Exception:  # FR-019: the database blinked; log it and poll again
                log.exception("poll failed; retrying after the poll interval")
                done = []
            processed += len(done)
            for job in done:
                log.info("job %s (%s) -> %s", job.id, job.task, job.state)
            if once or (max_jobs is not None and processed >= max_jobs):
                break
            if not done:
                stop.wait(settings.worker_poll_interval)
    finally:
        platform.close()
    return processed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.nexus_babel.worker")
    parser.add_argument("--once", action="store_true", help="poll once, run at most one job")
    parser.add_argument("--max-jobs", type=int, default=None, help="exit after N jobs")
    args = parser.parse_args(argv)
    if args.max_jobs is not None and args.max_jobs < 1:
        parser.error("--max-jobs must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    processed = run_worker(get_settings(), once=args.once, max_jobs=args.max_jobs, stop=stop)
    print(f"processed {processed} job(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
