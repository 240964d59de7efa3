"""A real PostgreSQL for the suite: the running server, or a throwaway cluster.

Order: ``DURQ_TEST_PG_URL`` if set; else a server on 127.0.0.1:5432 (user postgres);
else, if PostgreSQL's binaries are installed, a new cluster in a temp dir on a free port,
removed at the end. Otherwise the suite stops and says what is missing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _reachable(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=3).close()
        return True
    except psycopg.OperationalError:
        return False


def _bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    for path in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(path, "initdb").exists():
            return Path(path)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> tuple[list[str], str | None]:
    """initdb refuses to run as root: run the cluster as an unprivileged user."""
    if os.geteuid() != 0:
        return [], None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"], name
    raise RuntimeError("running as root with no 'postgres' or 'nobody' user to run initdb as")


@contextmanager
def throwaway_cluster(bindir: Path) -> Iterator[str]:
    prefix, user = _as_user()
    root = Path(tempfile.mkdtemp(prefix="durq-pg-"))
    data = root / "data"
    port = _free_port()
    if user:
        shutil.chown(root, user=user)
        os.chmod(root, 0o700)
    try:
        subprocess.run(
            [
                *prefix,
                str(bindir / "initdb"),
                "-D",
                str(data),
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
        subprocess.run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(root / "log"),
                "-w",
                "-o",
                f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=200",
                "start",
            ],
            check=True,
            capture_output=True,
        )
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 30
        while not _reachable(url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"throwaway PostgreSQL did not start; see {root / 'log'}")
            time.sleep(0.1)
        yield url
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield an admin URL (database ``postgres``) of a server the tests may use."""
    explicit = os.environ.get("DURQ_TEST_PG_URL")
    if explicit:
        if not _reachable(explicit):
            raise RuntimeError(f"DURQ_TEST_PG_URL={explicit} is not reachable")
        yield explicit
        return
    if _reachable(DEFAULT_URL):
        yield DEFAULT_URL
        return
    bindir = _bindir()
    if bindir is None:
        raise RuntimeError(
            "PostgreSQL is needed for the test suite and none was found: no server on "
            "127.0.0.1:5432 and no initdb on this machine. Install PostgreSQL "
            "(Debian: apt-get install postgresql) or set DURQ_TEST_PG_URL to a server "
            "where the tests may create databases."
        )
    with throwaway_cluster(bindir) as url:
        yield url


def with_database(admin_url: str, name: str) -> str:
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def create_database(admin_url: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"
