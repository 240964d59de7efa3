"""Throwaway PostgreSQL databases named ``durq_bench_*`` on the benchmark server."""

from __future__ import annotations

import os
import uuid

import psycopg


def url_for(admin_url: str, name: str) -> str:
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def create(admin_url: str, label: str) -> str:
    # The creating process's pid is in the name, so a later run can tell leftovers
    # from the databases of a run still going.
    name = f"durq_bench_{label}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url_for(admin_url, name)


def drop(admin_url: str, url: str) -> None:
    name = url.rpartition("/")[2]
    if not name.startswith("durq_bench_"):
        raise ValueError(f"refusing to drop {name!r}: not a benchmark database")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_leftovers(admin_url: str) -> None:
    """Databases left by an interrupted run (its process is gone)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'durq\\_bench\\_%'"
            )
        ]
        for name in names:
            parts = name.split("_")
            pid = int(parts[-2]) if len(parts) >= 5 and parts[-2].isdigit() else None
            if pid is not None and _alive(pid):
                continue
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
