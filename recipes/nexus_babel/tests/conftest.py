"""Fixtures: the platform on each test's own database (``db_url``: SQLite and PostgreSQL)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recipes.nexus_babel import Settings, create_app
from recipes.nexus_babel.config import DEFAULT_CORPUS_ROOT
from recipes.nexus_babel.tests.helpers import release_fifo


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A private copy of the shipped corpus, so a test may add files (or FIFOs) to it."""
    root = tmp_path / "corpus"
    shutil.copytree(DEFAULT_CORPUS_ROOT, root)
    return root


@pytest.fixture
def make_settings(db_url: str, corpus: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": db_url,
            "environment": "test",
            "corpus_root": corpus,
            "rate_limit_per_second": 0,
            "log_format": "off",  # the test process keeps its own logging
        }
        return Settings(**(values | overrides))

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def make_client(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., TestClient]]:
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        client = TestClient(create_app(make_settings(**overrides)))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


@pytest.fixture
def fifos(corpus: Path) -> Iterator[Callable[[str], Path]]:
    """Named pipes in the corpus: a job reading one blocks until the test writes to it.
    Every one is released at teardown so no task thread is left waiting."""
    made: list[Path] = []

    def make(name: str) -> Path:
        import os

        path = corpus / name
        os.mkfifo(path)
        made.append(path)
        return path

    yield make
    for path in made:
        release_fifo(path, "released at teardown\n", timeout=0.5)
