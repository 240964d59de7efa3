"""Fixtures: the recipe's runtime on durq's per-test database (SQLite and PostgreSQL), and
a real HTTP client over the ASGI app."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import durq
from recipes.nexus_closure.api import create_app
from recipes.nexus_closure.tasks import NexusRuntime, create_runtime

INTERNAL_SECRET = "internal-secret-for-tests"


@pytest.fixture
def make_runtime(make_app: Callable[..., durq.App]) -> Iterator[Callable[..., NexusRuntime]]:
    made: list[NexusRuntime] = []

    def make(**durq_settings: Any) -> NexusRuntime:
        runtime = create_runtime(make_app(**durq_settings))
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.close()


@pytest.fixture
def runtime(make_runtime: Callable[..., NexusRuntime]) -> NexusRuntime:
    return make_runtime()


@pytest.fixture
def client(runtime: NexusRuntime) -> Iterator[TestClient]:
    app = create_app(runtime, requires_internal_header=True, internal_secret=INTERNAL_SECRET)
    with TestClient(app, headers={"X-Nexus-Internal": INTERNAL_SECRET}) as test_client:
        yield test_client
