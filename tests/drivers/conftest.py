"""Fixtures for the driver conformance tests: a driver over each backend's migrated
database, a ``NewJob`` factory, and plain SQL beside the driver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durq
from durq._drivers import Driver, open_driver

from .. import pg
from .helpers import JobFactory, PlainSql


@pytest.fixture
def driver(db_url: str) -> Iterator[Driver]:
    d = open_driver(db_url, pool_min_size=1, pool_max_size=6)
    yield d
    d.close()


@pytest.fixture
def new_job(db_url: str) -> Iterator[JobFactory]:
    app = durq.App(db_url)  # only builds requests: it never opens a connection
    yield JobFactory(app)
    app.close()


@pytest.fixture
def sql(db_url: str) -> Iterator[PlainSql]:
    plain = PlainSql(db_url)
    yield plain
    plain.close()


@pytest.fixture
def fresh_url(db_url: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no migration applied) on the same backend as ``db_url``."""
    if db_url.startswith("sqlite:"):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    admin = str(request.getfixturevalue("pg_admin_url"))
    name = pg.unique_name("durq_fresh")
    url = pg.create_database(admin, name)
    yield url
    pg.drop_database(admin, name)
