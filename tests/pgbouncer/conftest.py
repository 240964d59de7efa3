"""PgBouncer in transaction pooling mode in front of each test's own database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durq
from durq.settings import Settings

from .. import bouncer


@pytest.fixture(scope="session")
def pgbouncer_hostport(pg_admin_url: str) -> Iterator[str]:
    binary = bouncer.find_pgbouncer()
    if binary is None:
        pytest.skip(
            "pgbouncer is not installed (Debian: apt-get install pgbouncer; `make install` "
            "does it where apt is available)"
        )
    with bouncer.pgbouncer(pg_admin_url, binary) as hostport:
        yield hostport


@pytest.fixture
def bouncer_url(pg_url: str, pgbouncer_hostport: str) -> str:
    """The test's own migrated database, reached through PgBouncer."""
    return bouncer.through(pg_url, pgbouncer_hostport)


@pytest.fixture
def make_bounced_app(bouncer_url: str) -> Iterator[Callable[..., durq.App]]:
    apps: list[durq.App] = []

    def make(**overrides: Any) -> durq.App:
        overrides.setdefault("pgbouncer", True)
        app = durq.App(settings=Settings(database_url=bouncer_url, **overrides))
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
