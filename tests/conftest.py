"""Fixtures: one real database per test, SQLite in a temp dir or PostgreSQL cloned from a
migrated template."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durq
from durq.settings import Settings

from . import pg

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    with pg.postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    name = pg.unique_name("durq_tpl")
    url = pg.create_database(pg_admin_url, name)
    app = durq.App(url)
    app.migrate()
    app.close()
    yield name
    pg.drop_database(pg_admin_url, name)


def _sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'durq.db'}"
    app = durq.App(url)
    app.migrate()
    app.close()
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return _sqlite_url(tmp_path)


@pytest.fixture
def pg_url(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    name = pg.unique_name("durq_t")
    url = pg.create_database(pg_admin_url, name, template=pg_template)
    yield url
    pg.drop_database(pg_admin_url, name)


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return _sqlite_url(tmp_path)
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def make_app(db_url: str) -> Iterator[Callable[..., durq.App]]:
    apps: list[durq.App] = []

    def make(**overrides: Any) -> durq.App:
        app = durq.App(settings=Settings(database_url=db_url, **overrides))
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: Callable[..., durq.App]) -> durq.App:
    return make_app()
