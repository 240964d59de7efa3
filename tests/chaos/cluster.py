"""A throwaway PostgreSQL cluster the chaos runs may restart, stop and kill at will (never
the developer's server): its own data directory and port, removed at the end."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from .. import pg

__all__ = ["Cluster", "cluster"]


class Cluster:
    def __init__(self, bindir: Path, root: Path, port: int, prefix: list[str]) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.port = port
        self.prefix = prefix
        self.admin_url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        subprocess.run(
            [*self.prefix, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
            check=check,
            # The server inherits pg_ctl's output: never a pipe we would wait on.
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=300 -c full_page_writes=off"
        )
        self._pg_ctl("-l", str(self.root / "log"), "-w", "-o", options, "start")
        self.wait_reachable()

    def restart(self, mode: str) -> None:
        """``pg_ctl restart -m fast|immediate``: every connection drops, the server comes
        back with the same options (immediate: crash recovery from the WAL)."""
        self._pg_ctl("-l", str(self.root / "log"), "-w", "-m", mode, "restart")
        self.wait_reachable()

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-w", "-m", mode, "stop", check=False)

    def wait_reachable(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.admin_url, connect_timeout=3).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the throwaway PostgreSQL did not come back; see {self.root / 'log'}"
                    ) from None
                time.sleep(0.05)

    def terminate_backends(self, database: str, keep: str = "") -> int:
        """``pg_terminate_backend`` every connection to ``database`` but this one and
        those whose application_name is ``keep``."""
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid() AND application_name <> %s",
                (database, keep),
            ).fetchall()
        return len(rows)


@contextmanager
def cluster() -> Iterator[Cluster]:
    """A new cluster on a free port; skips the caller's work with a clear error if
    PostgreSQL's server binaries (initdb, pg_ctl) are not installed."""
    bindir = pg._bindir()
    if bindir is None:
        raise RuntimeError(
            "the chaos runs need PostgreSQL's server binaries (initdb, pg_ctl) for a cluster "
            "of their own: apt-get install postgresql"
        )
    prefix, user = pg._as_user()
    root = Path(tempfile.mkdtemp(prefix="durq-chaos-"))
    if user:
        shutil.chown(root, user=user)
        root.chmod(0o700)
    subprocess.run(
        [
            *prefix,
            str(bindir / "initdb"),
            "-D",
            str(root / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
    )
    handle = Cluster(bindir, root, pg._free_port(), prefix)
    try:
        handle.start()
        yield handle
    finally:
        handle.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
