"""A real PgBouncer in transaction pooling mode in front of the suite's PostgreSQL.

Like the throwaway cluster in ``tests/pg.py``: its own ini in a temp dir, a free port,
run as an unprivileged user when the suite runs as root (PgBouncer refuses root), stopped
and removed at the end. One server connection per database and user, so every client of a
test shares it and any state a client leaves on a server connection shows at once.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from . import pg

__all__ = ["find_pgbouncer", "pgbouncer", "through"]


def find_pgbouncer() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(p).exists()), None
    )


@contextmanager
def pgbouncer(admin_url: str, binary: str) -> Iterator[str]:
    """Yield ``host:port`` of a PgBouncer (pool_mode = transaction) for ``admin_url``'s server."""
    target = conninfo_to_dict(admin_url)
    prefix, user = pg._as_user()
    root = Path(tempfile.mkdtemp(prefix="durq-pgbouncer-"))
    port = pg._free_port()
    (root / "users.txt").write_text(f'"{target.get("user", "postgres")}" ""\n')
    (root / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={target.get('host', '127.0.0.1')} port={target.get('port', 5432)}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {root / 'users.txt'}",
                "pool_mode = transaction",
                "default_pool_size = 1",
                "max_client_conn = 500",
                "query_wait_timeout = 30",
                "server_reset_query =",
                "ignore_startup_parameters = extra_float_digits,options",
                f"logfile = {root / 'pgbouncer.log'}",
                f"pidfile = {root / 'pgbouncer.pid'}",
                "",
            ]
        )
    )
    if user:
        for path in (root, *root.iterdir()):
            shutil.chown(path, user=user)
    proc = subprocess.Popen(
        [*prefix, binary, str(root / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"postgresql://{target.get('user', 'postgres')}@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 20
        while not pg._reachable(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (
                    (root / "pgbouncer.log").read_text()
                    if (root / "pgbouncer.log").exists()
                    else ""
                )
                raise RuntimeError(
                    f"PgBouncer did not start: {proc.stderr.read() if proc.stderr else ''}"
                    f"{log[-2000:]}"
                )
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def through(url: str, hostport: str) -> str:
    """``url`` with its host and port replaced by PgBouncer's."""
    scheme, _, rest = url.partition("://")
    creds, _, tail = rest.rpartition("@")
    _, _, path = tail.partition("/")
    return f"{scheme}://{creds + '@' if creds else ''}{hostport}/{path}"
