"""The dashboard over a real database (both backends): one key per role, a signed-in client."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import durq
from durq.api import create_app
from durq.api.keys import KeyService
from durq.settings import Settings

with warnings.catch_warnings():  # starlette suggests httpx2; httpx is what durq ships with
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

#: name → (owner, role): one key per role; "acme" owns the tenants' jobs, "other" does not.
ROLES = {
    "viewer": ("acme", "viewer"),
    "producer": ("acme", "producer"),
    "other_producer": ("other", "producer"),
    "operator": ("ops", "operator"),
    "admin": ("root", "admin"),
}
CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class Ui:
    app: durq.App
    keys: dict[str, str] = field(default_factory=dict)
    clients: list[TestClient] = field(default_factory=list)

    def client(self, who: str | None = None) -> TestClient:
        """A browser-like client, signed in as ``who`` (or not signed in)."""
        client = TestClient(create_app(self.app), follow_redirects=False)
        self.clients.append(client)
        if who is not None:
            response = client.post("/ui/login", data={"api_key": self.keys[who]})
            assert response.status_code == 303, response.text
        return client

    @staticmethod
    def csrf(client: TestClient, page: str = "/ui/jobs") -> str:
        found = CSRF_RE.search(client.get(page).text)
        assert found is not None, f"no CSRF token on {page}"
        return found.group(1)

    def close(self) -> None:
        for client in self.clients:
            client.close()


@pytest.fixture
def ui(db_url: str) -> Iterator[Ui]:
    app = durq.App(settings=Settings(database_url=db_url, api_rate_limit_per_second=0))
    app.migrate()
    keys = KeyService(app)
    made = Ui(app)
    for name, (owner, role) in ROLES.items():
        made.keys[name] = keys.create(owner, role)[1]
    yield made
    made.close()
    app.close()
