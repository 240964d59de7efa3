"""``--processes P``: a supervisor that runs P worker processes.

Children are started with ``spawn``, never ``fork``: a forked child would share the
parent's database connections. Each child imports the App from its ``module:attribute``
spec and runs one :class:`durq.Worker`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import time
from typing import Any

from .. import logs
from .._worker.runner import Worker
from ..errors import ConfigurationError, DurqError
from ..logs import LogFormat
from .loading import import_app

__all__ = ["configure_logging", "supervise"]

log = logging.getLogger("durq.worker")


def configure_logging(level: str = "INFO", fmt: LogFormat = "auto") -> None:
    """Structured lines on stderr (see :mod:`durq.logs`)."""
    logs.configure(level, fmt)


def _child_main(
    app_spec: str, database_url: str | None, options: dict[str, Any], parent_pid: int
) -> None:
    """One supervised worker process (started with spawn: nothing inherited but arguments)."""
    os.setpgrp()  # a terminal's Ctrl-C reaches the supervisor only; it forwards one SIGTERM
    early: list[int] = []  # a stop forwarded while this process is still importing
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: early.append(signum))
    configure_logging(options.pop("log_level", "INFO"), options.pop("log_format", "auto"))
    code = 1
    try:
        app = import_app(app_spec, database_url)
        worker = Worker(app, parent_pid=parent_pid, **options)
        if early:
            worker.request_stop()
        code = worker.run(install_signals=True)
        app.close()
    except ConfigurationError as exc:
        log.error("%s [%s]", exc, exc.code)
        code = 2
    except DurqError as exc:
        log.error("%s [%s]", exc, exc.code)
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # do not wait for sync-task threads that outlived the shutdown


def supervise(
    app_spec: str,
    processes: int,
    options: dict[str, Any],
    *,
    database_url: str | None = None,
) -> int:
    """Run ``processes`` worker processes and keep them running until told to stop.

    SIGTERM/SIGINT: forwarded once to every child (each shuts down gracefully); a second
    signal is forwarded again (each exits at once). A child that crashes is restarted with
    a growing delay (1 s, 2 s, … 30 s); one that exits 0 (``--once``, ``--max-jobs``) or 2
    (a configuration error: restarting cannot help) is not. Returns 0 if every child
    exited 0, 2 if one had a configuration error, else 1.
    """
    ctx = multiprocessing.get_context("spawn")  # connections must never cross a fork
    parent = os.getpid()
    children: dict[int, Any] = {}
    started: dict[int, float] = {}
    backoff: dict[int, float] = {}
    codes: dict[int, int] = {}
    signals: list[int] = []

    def start(slot: int) -> None:
        proc = ctx.Process(
            target=_child_main,
            args=(app_spec, database_url, dict(options), parent),
            name=f"durq-worker-{slot}",
        )
        proc.start()
        children[slot] = proc
        started[slot] = time.monotonic()
        log.info("supervisor: started worker process %d (pid %s)", slot, proc.pid)

    def on_signal(signum: int, _frame: Any) -> None:
        signals.append(signum)
        for proc in children.values():
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    restart_at: dict[int, float] = {}
    try:
        for slot in range(processes):
            start(slot)
        while children or (restart_at and not signals):
            for slot, proc in list(children.items()):
                proc.join(timeout=0.1)
                if proc.exitcode is None:
                    continue
                del children[slot]
                codes[slot] = proc.exitcode
                if proc.exitcode in (0, 2) or signals:
                    continue
                ran = time.monotonic() - started[slot]
                delay = 1.0 if ran > 60 else min(backoff.get(slot, 0.5) * 2, 30.0)
                backoff[slot] = delay
                restart_at[slot] = time.monotonic() + delay
                log.warning(
                    "supervisor: worker process %d (pid %s) exited with %s; restarting it in %gs",
                    slot,
                    proc.pid,
                    proc.exitcode,
                    delay,
                )
            for slot, when in list(restart_at.items()):
                if signals:
                    restart_at.clear()
                elif time.monotonic() >= when:
                    del restart_at[slot]
                    start(slot)
            if not children and restart_at:
                time.sleep(0.1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if all(code == 0 for code in codes.values()):
        return 0
    return 2 if 2 in codes.values() else 1
