"""Run the recipe: ``python -m recipes.nexus_closure serve`` (API) and
``python -m recipes.nexus_closure worker`` (durq worker on queue ``ingest``).

Both read ``DURQ_DATABASE_URL`` (default ``sqlite:///durq.db``); ``serve`` also reads
``NEXUS_INTERNAL_SECRET``, the value ``X-Nexus-Internal`` must carry on ``/internal/``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import durq

from . import default_library_closure as closure
from .tasks import NexusRuntime, create_runtime

__all__ = ["main"]


def _runtime(database_url: str | None) -> NexusRuntime:
    app = durq.App(database_url)
    app.migrate()  # durq's tables; the recipe's own are created by create_runtime
    return create_runtime(app)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.nexus_closure")
    parser.add_argument("--database-url", help="default: DURQ_DATABASE_URL or sqlite:///durq.db")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="the HTTP API (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    worker = commands.add_parser("worker", help="a durq worker on queue ingest")
    worker.add_argument("--concurrency", type=int, default=4)
    worker.add_argument("--poll-interval", type=float, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    runtime = _runtime(args.database_url)
    if args.command == "serve":
        import uvicorn

        from .api import create_app

        secret = os.environ.get("NEXUS_INTERNAL_SECRET")
        if not secret:
            print("set NEXUS_INTERNAL_SECRET: /internal/ routes need it", file=sys.stderr)
            return 2
        uvicorn.run(create_app(runtime, internal_secret=secret), host=args.host, port=args.port)
        return 0
    return durq.Worker(
        runtime.app,
        queues=[closure.BACKFILL_QUEUE],
        concurrency=args.concurrency,
        poll_interval=args.poll_interval,
    ).run()


if __name__ == "__main__":
    sys.exit(main())
