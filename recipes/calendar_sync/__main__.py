"""``python -m recipes.calendar_sync [--port 8000]``: the API with a worker in-process."""

from __future__ import annotations

import argparse

import uvicorn

from .api import create_app
from .config import Settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m recipes.calendar_sync")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(create_app(Settings(), run_worker=True), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
