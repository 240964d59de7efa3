"""Run a worker loop in N processes and stop them all on SIGTERM."""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Callable
from typing import Any


def run_processes(target: Callable[..., None], args: tuple[Any, ...], processes: int) -> None:
    """``target(*args, stop)`` in ``processes`` processes; returns after SIGTERM/SIGINT."""
    if processes <= 1:
        stop = threading.Event()
        _on_term(stop.set)
        target(*args, stop)
        return
    ctx = multiprocessing.get_context("spawn")
    stop_mp = ctx.Event()
    children = [ctx.Process(target=target, args=(*args, stop_mp)) for _ in range(processes)]
    for child in children:
        child.start()
    done = threading.Event()
    _on_term(done.set)
    done.wait()
    stop_mp.set()
    for child in children:
        child.join(10)
        if child.is_alive():
            child.kill()


def _on_term(callback: Callable[[], None]) -> None:
    def handler(signum: int, frame: Any) -> None:
        callback()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
