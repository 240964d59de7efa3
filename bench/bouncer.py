"""The scale-out harness's PgBouncer (transaction mode, as ``tests/bouncer.py`` runs it)
and its clean stop: a signal never cuts a cleanup short."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

Row = dict[str, Any]


def as_user() -> list[str]:
    """PgBouncer refuses to run as root: run it as ``postgres`` (or ``nobody``)."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--"]
    raise RuntimeError("running as root with no 'postgres' or 'nobody' user for PgBouncer")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def pgbouncer(admin_url: str, pool_size: int) -> Iterator[str]:
    """Yield ``host:port`` of a PgBouncer (pool_mode = transaction); stopped on exit."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    target = conninfo_to_dict(admin_url)
    user = str(target.get("user", "postgres"))
    root = Path(tempfile.mkdtemp(prefix="durq-scale-pgbouncer-"))
    port = free_port()
    (root / "users.txt").write_text(f'"{user}" ""\n')
    settings = {
        "listen_addr": "127.0.0.1",
        "listen_port": port,
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": root / "users.txt",
        "admin_users": user,
        "pool_mode": "transaction",
        "default_pool_size": pool_size,
        "max_client_conn": 2000,
        "query_wait_timeout": 60,
        "ignore_startup_parameters": "extra_float_digits,options",
        "logfile": root / "pgbouncer.log",
        "pidfile": root / "pgbouncer.pid",
    }
    lines = [
        "[databases]",
        f"* = host={target.get('host', '127.0.0.1')} port={target.get('port', 5432)}",
        "[pgbouncer]",
    ]
    (root / "pgbouncer.ini").write_text(
        "\n".join([*lines, *(f"{k} = {v}" for k, v in settings.items()), ""])
    )
    prefix = as_user()
    if prefix:
        for path in (root, *root.iterdir()):
            shutil.chown(path, user=prefix[2])
    # A session of its own: a terminal's Ctrl-C reaches the harness, which stops PgBouncer.
    proc = subprocess.Popen(
        [*prefix, binary, str(root / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pid = None
    try:
        admin = f"postgresql://{user}@127.0.0.1:{port}/pgbouncer"
        deadline = time.monotonic() + 20
        while True:
            try:
                psycopg.connect(admin, connect_timeout=3).close()
                break
            except psycopg.OperationalError:
                log = root / "pgbouncer.log"
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text()[-2000:] if log.exists() else ""
                    raise RuntimeError(f"PgBouncer did not start:\n{tail}") from None
                time.sleep(0.05)
        pid = int((root / "pgbouncer.pid").read_text().strip())
        yield f"127.0.0.1:{port}"
    finally:
        with shielded():
            for sig in (signal.SIGTERM, signal.SIGKILL):  # SIGTERM: PgBouncer's immediate shutdown
                # PgBouncer itself first, so that runuser reaps it and exits after it.
                with contextlib.suppress(ProcessLookupError):
                    if pid is not None and is_pgbouncer(pid):
                        os.kill(pid, sig)
                    else:
                        os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
                if proc.poll() is not None and not (pid is not None and is_pgbouncer(pid)):
                    break
            shutil.rmtree(root, ignore_errors=True)


def is_pgbouncer(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return "(pgbouncer)" in stat and stat.rpartition(")")[2].split()[0] != "Z"


def through(url: str, hostport: str) -> str:
    scheme, _, rest = url.partition("://")
    creds, _, tail = rest.rpartition("@")
    return f"{scheme}://{creds + '@' if creds else ''}{hostport}/{tail.partition('/')[2]}"


def pools(admin: psycopg.Connection[Any], db: str) -> Row:
    cur = admin.execute("SHOW POOLS")
    names = [d.name for d in cur.description or []]
    out = {"clients": 0, "clients_waiting": 0, "bouncer_servers": 0}
    for row in cur.fetchall():
        pool = dict(zip(names, row, strict=True))
        if pool["database"] != db:
            continue
        for name, value in pool.items():
            if name.startswith("cl_") and "cancel" not in name:
                out["clients"] += int(value)
            elif name.startswith("sv_") and name not in ("sv_active_cancel", "sv_being_canceled"):
                out["bouncer_servers"] += int(value)
        out["clients_waiting"] += int(pool["cl_waiting"])
    return out


class _Signals:
    shield = 0  # > 0 while cleaning up: a signal then waits until the cleanup is done
    deferred = False
    raised = False


def interrupt(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM: KeyboardInterrupt once, never in the middle of a cleanup (stopping
    workers and PgBouncer, dropping a database)."""
    if _Signals.raised:
        return
    if _Signals.shield:
        _Signals.deferred = True
        return
    _Signals.raised = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    _Signals.shield += 1
    try:
        yield
    finally:
        _Signals.shield -= 1
    if not _Signals.shield and _Signals.deferred and not _Signals.raised:
        _Signals.raised = True
        raise KeyboardInterrupt
