"""Migrations produce exactly the reference schema, and applying them twice is a no-op.

Regenerate the references after a deliberate schema change with
``DURQ_UPDATE_SCHEMA_REFERENCE=1 pytest tests/conformance/test_schema.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._drivers.sqlite.driver import path_from_url

from .. import pg

REFERENCE = Path(__file__).resolve().parents[1] / "schema"


def _describe_sqlite(url: str) -> str:
    with sqlite3.connect(path_from_url(url)) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL ORDER BY type, name"
        ).fetchall()
    return "\n".join(f"{t} {n}: {_squash(sql)}" for t, n, sql in rows) + "\n"


def _squash(sql: str) -> str:
    return re.sub(r"\s+", " ", sql)


def _describe_postgres(url: str) -> str:
    lines = []
    with psycopg.connect(conninfo_from_url(url)) as conn:
        for row in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, "
            "coalesce(column_default, '') FROM information_schema.columns "
            "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
        ):
            lines.append("column " + " ".join(str(v) for v in row))
        for (indexdef,) in conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname"
        ):
            lines.append(f"index {indexdef}")
        for name, definition in conn.execute(
            "SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
            "JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE n.nspname = current_schema() ORDER BY conname"
        ):
            lines.append(f"constraint {name}: {definition}")
    return "\n".join(lines) + "\n"


def test_migrated_schema_equals_the_reference(db_url: str) -> None:
    dialect = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    actual = _describe_sqlite(db_url) if dialect == "sqlite" else _describe_postgres(db_url)
    path = REFERENCE / f"{dialect}.txt"
    if os.environ.get("DURQ_UPDATE_SCHEMA_REFERENCE"):
        path.write_text(actual)
    assert actual == path.read_text(), f"schema differs from {path.name}; see module docstring"


def test_migrate_twice_is_a_no_op_and_versions_match_across_dialects(app: durq.App) -> None:
    assert app.migrate() == []
    app.check_schema()
    from durq._drivers.postgres.driver import PostgresDriver
    from durq._drivers.sqlite.driver import SqliteDriver

    pg_versions = PostgresDriver("postgresql://x@localhost/x").known_migrations()
    sqlite_versions = SqliteDriver("sqlite:///x.db").known_migrations()
    assert pg_versions == sqlite_versions and pg_versions[0] == 1
    assert app.driver.applied_migrations() == pg_versions


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_concurrent_migrate_on_a_fresh_database_applies_once(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'fresh.db'}"
    else:
        admin = request.getfixturevalue("pg_admin_url")
        name = pg.unique_name("durq_fresh")
        url = pg.create_database(admin, name)
        request.addfinalizer(lambda: pg.drop_database(admin, name))
    apps = [durq.App(url) for _ in range(3)]
    applied: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def run(a: durq.App) -> None:
        start.wait()
        try:
            applied.append(a.migrate())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(a,)) for a in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for a in apps:
        a.close()
    assert errors == []
    every = apps[0].driver.known_migrations()
    assert sorted(applied, key=len) == [[], [], every]  # exactly one migrator applied them
