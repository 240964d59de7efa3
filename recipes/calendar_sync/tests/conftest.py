"""Fixtures: the recipe on each test's own database (``db_url``: SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recipes.calendar_sync import CalendarSync, FakeProvider, Settings, create_app

VIEWER = ("viewer@example.com", "viewer-password")


@pytest.fixture
def make_settings(db_url: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": db_url,
            "environment": "test",
            "viewer_email": VIEWER[0],
            "viewer_password": VIEWER[1],
        }
        return Settings(**(values | overrides))

    return make


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
def make_sync(
    make_settings: Callable[..., Settings], provider: FakeProvider
) -> Iterator[Callable[..., CalendarSync]]:
    made: list[CalendarSync] = []

    def make(**overrides: Any) -> CalendarSync:
        sync = CalendarSync(make_settings(**overrides), provider)
        sync.migrate()
        made.append(sync)
        return sync

    yield make
    for sync in made:
        sync.close()


@pytest.fixture
def make_client(
    make_settings: Callable[..., Settings], provider: FakeProvider
) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        client = TestClient(create_app(make_settings(**overrides), executor=provider))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def sync_of(client: TestClient) -> CalendarSync:
    sync: CalendarSync = client.app.state.sync  # type: ignore[attr-defined]
    return sync
