"""Fixtures: Euterpe on each test's own database (``db_url``: SQLite and PostgreSQL), one
S3-compatible server for the session, and the deployment's environment."""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recipes.euterpe import Euterpe, Settings, create_app

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


class Stand:
    """Euterpe's API in this process (over httpx's ASGI transport), a bucket holding the
    tone, and jobs submitted with freshly issued scoped credentials."""

    def __init__(self, client: TestClient, s3: S3Server, tone: Path) -> None:
        self.client = client
        self.s3 = s3
        self.bucket = s3.new_bucket()
        s3.s3.upload_file(str(tone), self.bucket, "in/tone.wav")

    @property
    def euterpe(self) -> Euterpe:
        found: Euterpe = self.client.app.state.euterpe  # type: ignore[attr-defined]
        return found

    def put(self, key: str, path: Path | None = None, data: bytes | None = None) -> None:
        if path is not None:
            self.s3.s3.upload_file(str(path), self.bucket, key)
        else:
            self.s3.s3.put_object(Bucket=self.bucket, Key=key, Body=data or b"")

    def body(
        self, key: str = "tone-1", source: str = "in/tone.wav", **extra: Any
    ) -> dict[str, Any]:
        prefix = f"out/{uuid.uuid4().hex[:8]}/"
        creds = self.s3.issue(self.bucket, source, prefix)
        return {
            "idempotency_key": key,
            "source": {"bucket": self.bucket, "key": source},
            "output": {"bucket": self.bucket, "prefix": prefix},
            "renditions": [{"name": "low", "format": "mp3", "bitrate": "64k"}],
            "storage_credentials": creds.as_json(),
        } | extra

    def submit(self, requester: str = "acme", **kw: Any) -> Any:
        return self.client.post("/transcode", json=self.body(**kw), headers=key_of(requester))

    def status(self, job_id: int, requester: str = "acme") -> Any:
        return self.client.get(
            "/transcode/status", params={"job_id": job_id}, headers=key_of(requester)
        )


def key_of(requester: str) -> dict[str, str]:
    return {"X-API-Key": API_KEYS[requester]}


@pytest.fixture
def make_stand(
    make_settings: Callable[..., Settings], s3: S3Server, tone: Path
) -> Iterator[Callable[..., Stand]]:
    clients: list[TestClient] = []

    def make(**overrides: Any) -> Stand:
        client = TestClient(create_app(make_settings(**overrides)))
        client.__enter__()
        clients.append(client)
        return Stand(client, s3, tone)

    yield make
    for client in clients:
        client.__exit__(None, None, None)
