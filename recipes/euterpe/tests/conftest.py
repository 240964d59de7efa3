"""Fixtures: Euterpe on each test's own database (``db_url``: SQLite and PostgreSQL), one
S3-compatible server for the session, and the deployment's environment."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from recipes.euterpe import Settings

from .world import API_KEYS, S3Server, euterpe_env, ffmpeg_or_skip, make_tone

KEK = base64.b64encode(os.urandom(32)).decode()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("s3") / "s3-server.log")
    yield server
    server.close()


@pytest.fixture(scope="session")
def tone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated 2-second 440 Hz tone."""
    return make_tone(tmp_path_factory.mktemp("media") / "tone.wav")


@pytest.fixture
def ffmpeg() -> str:
    return ffmpeg_or_skip()


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def deployment(
    db_url: str, s3: S3Server, work_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The ``EUTERPE_*``/``DURQ_*`` environment, set here too (the API in this process
    seals secrets with the same key the worker opens them with); fast polling for tests."""
    env = euterpe_env(
        db_url,
        s3.url,
        work_dir,
        KEK,
        DURQ_POLL_INTERVAL="0.1",
        DURQ_WEBHOOK_POLL_MIN="0.05",
        DURQ_WEBHOOK_POLL_MAX="0.15",
        DURQ_WEBHOOK_BACKOFF_BASE="0.1",
        DURQ_WEBHOOK_BACKOFF_CAP="0.5",
    )
    for name in list(os.environ):
        if name.startswith(("DURQ_", "EUTERPE_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def make_settings(deployment: dict[str, str]) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        return Settings(**overrides)

    return make


@pytest.fixture
def keys() -> dict[str, str]:
    return dict(API_KEYS)
