"""An API over a real database (both backends), with one key per role and two tenants."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import durq
from durq.api import create_app
from durq.api.keys import KeyService
from durq.settings import Settings

from .. import pg
from ..conftest import BACKENDS, _sqlite_url

with warnings.catch_warnings():  # starlette suggests httpx2; httpx is what durq ships with
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

INTERNAL_TOKEN = "internal-secret"

#: name → (owner, role). "acme" is the tenant whose jobs the tests create; "other" is not.
KEYS = {
    "viewer": ("acme", "viewer"),
    "producer": ("acme", "producer"),
    "other_producer": ("other", "producer"),
    "other_viewer": ("other", "viewer"),
    "operator": ("ops", "operator"),
    "admin": ("root", "admin"),
}


@dataclass
class Api:
    app: durq.App
    client: TestClient
    keys: dict[str, str] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)
    worker: durq.Worker | None = None
    worker_thread: threading.Thread | None = None

    def start_worker(self) -> None:
        """A real worker beside the API (execution_mode "sync" waits for one)."""
        if self.worker is not None:
            return
        self.worker = durq.Worker(self.app, poll_interval=0.05, maintenance=False)
        self.worker_thread = threading.Thread(target=self.worker.run, daemon=True)
        self.worker_thread.start()
        assert self.worker.ready.wait(20), "the worker did not start"

    def close(self) -> None:
        if self.worker is not None and self.worker_thread is not None:
            self.worker.request_stop()
            self.worker_thread.join(30)
        self.client.close()
        self.app.close()

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}

    def call(self, method: str, path: str, who: str | None = None, **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}))
        if who is not None:
            headers.update(self.auth(who))
        return self.client.request(method, path, headers=headers, **kw)

    def submit(self, who: str = "producer", **body: Any) -> dict[str, Any]:
        body.setdefault("task", "add")
        body.setdefault("args", {"x": 1, "y": 2} if body["task"] == "add" else {})
        if body.get("execution_mode") == "sync":
            self.start_worker()
        response = self.call("POST", "/v1/jobs", who, json=body)
        assert response.status_code in (200, 202), response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    def job_count(self) -> int:
        return len(self.app.list_jobs(limit=1000))


def register_tasks(app: durq.App) -> None:
    @app.task(max_attempts=3, retry=durq.Fixed([0]))
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(max_attempts=2, retry=durq.Fixed([3600]))
    def flaky() -> None:
        raise ConnectionError("upstream down")

    @app.task(max_attempts=5)
    def invalid() -> None:
        raise durq.Fail("invalid_tuple", "source library is a default library")


def build_api(db_url: str, *, worker: bool = False, tasks: bool = True, **overrides: Any) -> Api:
    overrides.setdefault("api_rate_limit_per_second", 0)
    overrides.setdefault("api_internal_token", INTERNAL_TOKEN)
    overrides.setdefault("sqlite_synchronous", "NORMAL")  # API behaviour, not durability
    app = durq.App(settings=Settings(database_url=db_url, **overrides))
    if tasks:  # an App without tasks serves producers that lack the code: names unchecked
        register_tasks(app)
    api = Api(app, TestClient(create_app(app), raise_server_exceptions=False))
    service = KeyService(app)
    for name, (owner, role) in KEYS.items():
        if role in app.settings.role_ladder:
            key, plaintext = service.create(owner, role)
            api.keys[name], api.key_ids[name] = plaintext, key.id
    if worker:
        api.start_worker()
    return api


@pytest.fixture
def make_api(db_url: str) -> Iterator[Callable[..., Api]]:
    made: list[Api] = []

    def make(**overrides: Any) -> Api:
        made.append(build_api(db_url, **overrides))
        return made[-1]

    yield make
    for api in made:
        api.close()


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()


@pytest.fixture(scope="module", params=BACKENDS)
def module_db_url(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[str]:
    """One database per module and backend, for tests that never look at totals."""
    if request.param == "sqlite":
        yield _sqlite_url(tmp_path_factory.mktemp("api"))
        return
    admin_url = request.getfixturevalue("pg_admin_url")
    name = pg.unique_name("durq_api")
    yield pg.create_database(admin_url, name, template=request.getfixturevalue("pg_template"))
    pg.drop_database(admin_url, name)


@pytest.fixture(scope="module")
def shared_api(module_db_url: str) -> Iterator[Api]:
    api = build_api(module_db_url)
    yield api
    api.close()


@pytest.fixture(scope="module")
def shared_limits_api(module_db_url: str) -> Iterator[Api]:
    """An API with small input limits (2 KiB of args, 8 levels deep)."""
    api = build_api(module_db_url, max_args_bytes=2048, max_json_depth=8)
    yield api
    api.close()
