"""Every route by every role: allowed, 401, 403, and 404 for another owner's job."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from durq.api.keys import KeyService

from .conftest import INTERNAL_TOKEN, KEYS, Api

POWERS = {
    "viewer": {"read"},
    "producer": {"read", "submit"},
    "operator": {"read", "submit", "operate"},
    "admin": {"read", "submit", "operate", "admin"},
}
CALLERS = ["viewer", "producer", "operator", "admin", "other_viewer", "other_producer"]


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # {job} is a job of owner "acme"; {key} a fresh key to disable
    power: str
    tenant_scoped: bool = False  # another owner's tenant key gets 404
    body: dict[str, Any] | None = None
    ok: int = 200
    internal: bool = False

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


ROUTES = [
    Route("POST", "/v1/jobs", "submit", body={"task": "add", "args": {"x": 1, "y": 2}}, ok=202),
    Route("GET", "/v1/jobs", "read"),
    Route("GET", "/v1/jobs/{job}", "read", tenant_scoped=True),
    Route("GET", "/v1/jobs/{job}/attempts", "read", tenant_scoped=True),
    Route("GET", "/v1/jobs/{job}/artifacts", "read", tenant_scoped=True),
    Route("POST", "/v1/jobs/{job}/cancel", "submit", tenant_scoped=True),
    Route("POST", "/v1/jobs/{job}/requeue", "operate"),
    Route("GET", "/v1/queues", "read"),
    Route("POST", "/v1/queues/default/pause", "operate"),
    Route("POST", "/v1/queues/default/resume", "operate"),
    Route("GET", "/v1/workers", "read"),
    Route("GET", "/v1/auth/whoami", "read"),
    Route("GET", "/v1/keys", "admin"),
    Route("POST", "/v1/keys", "admin", body={"owner": "new-team", "role": "viewer"}, ok=201),
    Route("DELETE", "/v1/keys/{key}", "admin"),
    Route("POST", "/internal/jobs/requeue", "operate", body={"job_id": "{job}"}, internal=True),
]


def request(api: Api, route: Route, headers: dict[str, str]) -> Any:
    job_id = api.submit()["id"]
    path = route.path.replace("{job}", str(job_id))
    if "{key}" in path:
        path = path.replace("{key}", KeyService(api.app).create("temp", "viewer")[0].id)
    body = route.body
    if body is not None:
        body = {k: (job_id if v == "{job}" else v) for k, v in body.items()}
    if route.internal:
        headers = {**headers, "X-Internal-Token": INTERNAL_TOKEN}
    return api.client.request(route.method, path, headers=headers, json=body)


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_route_by_role(shared_api: Api, route: Route) -> None:
    """Each role on one route, then bad keys (one database per backend for all routes)."""
    api = shared_api
    for caller in CALLERS:
        owner, role = KEYS[caller]
        response = request(api, route, api.auth(caller))
        outcome = (caller, response.status_code, response.json())
        if route.power not in POWERS[role]:
            assert response.status_code == 403, outcome
            assert response.json()["error"]["code"] == "E_FORBIDDEN"
            assert f"has role {role!r}" in response.json()["error"]["message"]
        elif route.tenant_scoped and owner != "acme" and "operate" not in POWERS[role]:
            assert response.status_code == 404, outcome
            assert response.json()["error"]["code"] == "E_NOT_FOUND"
        else:
            assert response.status_code == route.ok, outcome
            assert "data" in response.json()
    refuses_missing_invalid_and_disabled_keys(api, route)


def refuses_missing_invalid_and_disabled_keys(api: Api, route: Route) -> None:
    disabled = KeyService(api.app).create("acme", "admin")
    KeyService(api.app).disable(disabled[0].id)
    cases: dict[str, dict[str, str]] = {
        "missing": {},
        "invalid": {"Authorization": "Bearer durq_not-a-real-key"},
        "invalid header": {"X-API-Key": "durq_not-a-real-key"},
        "not bearer": {"Authorization": f"Basic {api.keys['admin']}"},
        "disabled": {"X-API-Key": disabled[1]},
    }
    for case, headers in cases.items():
        response = request(api, route, headers)
        assert response.status_code == 401, (case, response.text)
        error = response.json()["error"]
        assert error["code"] == "E_UNAUTHENTICATED"
        expected = "was disabled" if case == "disabled" else "API key"
        assert expected in error["message"], error


@pytest.mark.parametrize("token", [None, "wrong"], ids=["no-token", "wrong-token"])
def test_internal_routes_need_the_internal_token(api: Api, token: str | None) -> None:
    job_id = api.submit()["id"]
    headers = {} if token is None else {"X-Internal-Token": token}
    for caller in ("operator", "admin", None):
        auth = api.auth(caller) if caller else {}
        response = api.client.post(
            "/internal/jobs/requeue", json={"job_id": job_id}, headers={**headers, **auth}
        )
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "E_INTERNAL_ONLY"
    assert api.app.get_job(job_id).state == "queued"


def test_internal_routes_closed_without_a_configured_token(
    make_api: Callable[..., Api],
) -> None:
    api = make_api(api_internal_token=None)
    response = api.call(
        "POST",
        "/internal/jobs/requeue",
        "admin",
        json={"job_id": 1},
        headers={"X-Internal-Token": ""},
    )
    assert response.status_code == 403
    assert "DURQ_API_INTERNAL_TOKEN" in response.json()["error"]["message"]


def test_health_and_metrics_need_no_key(api: Api) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"):
        assert api.client.get(path).status_code == 200, path


def test_seed_002_ladder_maps_powers_onto_its_roles(make_api: Callable[..., Api]) -> None:
    api = make_api(
        api_roles="viewer,operator,researcher,admin",
        api_submit_role="operator",
        api_operate_role="operator",
    )
    service = KeyService(api.app)
    keys = {role: service.create("lab", role)[1] for role in api.app.settings.role_ladder}

    def call(role: str, method: str, path: str, **kw: Any) -> int:
        headers = {"X-API-Key": keys[role]}
        return int(api.client.request(method, path, headers=headers, **kw).status_code)

    body = {"task": "add", "args": {"x": 1, "y": 1}}
    assert call("viewer", "POST", "/v1/jobs", json=body) == 403
    assert call("operator", "POST", "/v1/jobs", json=body) == 202
    assert call("researcher", "POST", "/v1/jobs/1/requeue") == 200
    assert call("researcher", "GET", "/v1/keys") == 403
    assert call("admin", "GET", "/v1/keys") == 200
    whoami = api.client.get("/v1/auth/whoami", headers={"X-API-Key": keys["researcher"]})
    assert whoami.json()["data"]["roles"] == ["viewer", "operator", "researcher", "admin"]
    assert whoami.json()["data"]["powers"] == ["read", "submit", "operate"]
