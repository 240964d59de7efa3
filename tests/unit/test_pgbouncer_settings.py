"""DURQ_PGBOUNCER: no prepared statements, and workers poll unless told to LISTEN."""

from __future__ import annotations

import pytest

from durq._drivers.postgres.driver import PostgresDriver
from durq.settings import Settings

URL = "postgresql://durq@127.0.0.1:1/durq"


def test_pgbouncer_defaults_to_poll_only_wakeups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURQ_PGBOUNCER", "true")
    assert Settings(database_url=URL).listen_notify is False
    monkeypatch.setenv("DURQ_LISTEN_NOTIFY", "true")  # an explicit choice still wins
    assert Settings(database_url=URL).listen_notify is True


def test_without_pgbouncer_workers_listen() -> None:
    assert Settings(database_url=URL).listen_notify is True
    assert Settings(database_url=URL).pgbouncer is False


def test_the_driver_opens_connections_that_never_prepare() -> None:
    driver = PostgresDriver(URL, pgbouncer=True)
    assert driver.connect_kwargs == {"prepare_threshold": None}
    assert PostgresDriver(URL).connect_kwargs == {}
