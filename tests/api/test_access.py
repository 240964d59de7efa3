"""The role matrix: every route by every kind of caller, with the status each must get.

The table below lists every operation the API serves; a test compares it with the OpenAPI
route table, so a new route without a row here fails the suite. Callers: no key, a
disabled key, the internal token alone, two credentials that disagree, a viewer and a
producer of the job's owner, a producer and a viewer of another owner, an operator and an
admin. Public routes answer everyone; the rest answer 401, 403, 404 (another owner's job,
never "forbidden", so ids do not leak) or their success.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import durq
from durq.api import create_app
from durq.api.keys import KeyService

from .conftest import INTERNAL_TOKEN, KEYS, Api

POWERS = {
    "viewer": {"read"},
    "producer": {"read", "submit"},
    "operator": {"read", "submit", "operate"},
    "admin": {"read", "submit", "operate", "admin"},
}
ROLE_CALLERS = ["viewer", "producer", "other_producer", "other_viewer", "operator", "admin"]
BAD_CALLERS = [
    "no key",
    "disabled key",
    "internal token only",
    "bearer and a wrong X-API-Key",
    "X-API-Key and a wrong bearer",
    "X-API-Key and a non-bearer Authorization",
]
HOOK = "http://127.0.0.1:9/hook"  # never called: no deliverer runs here


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # the OpenAPI template; its parameters are filled by fill()
    power: str | None  # None: public, no key needed
    tenant_scoped: bool = False  # a key below operator sees only its owner's jobs
    body: dict[str, Any] | None = None
    ok: int = 200
    internal: bool = False

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


ROUTES = [
    Route("POST", "/v1/jobs", "submit", body={"task": "add", "args": {"x": 1, "y": 2}}, ok=202),
    Route("GET", "/v1/jobs", "read"),
    Route("GET", "/v1/jobs/{job_id}", "read", tenant_scoped=True),
    Route("GET", "/v1/jobs/{job_id}/attempts", "read", tenant_scoped=True),
    Route("GET", "/v1/jobs/{job_id}/artifacts", "read", tenant_scoped=True),
    Route("GET", "/v1/jobs/{job_id}/events", "read", tenant_scoped=True),
    Route("POST", "/v1/jobs/{job_id}/cancel", "submit", tenant_scoped=True),
    Route("POST", "/v1/jobs/{job_id}/requeue", "operate"),
    Route("GET", "/v1/events", "operate"),
    Route("POST", "/v1/events/{event_id}/redeliver", "operate"),
    Route("GET", "/v1/queues", "read"),
    Route("POST", "/v1/queues/{name}/pause", "operate"),
    Route("POST", "/v1/queues/{name}/resume", "operate"),
    Route("GET", "/v1/workers", "read"),
    Route("GET", "/v1/breakers", "read"),
    Route("POST", "/v1/breakers/{key}/reset", "operate"),
    Route("GET", "/v1/alerts", "read"),
    Route("POST", "/v1/alerts/{alert_id}/ack", "operate"),
    Route("GET", "/v1/auth/whoami", "read"),
    Route("GET", "/v1/keys", "admin"),
    Route("POST", "/v1/keys", "admin", body={"owner": "new-team", "role": "viewer"}, ok=201),
    Route("DELETE", "/v1/keys/{key_id}", "admin"),
    Route("POST", "/internal/jobs/requeue", "operate", body={"job_id": "{job_id}"}, internal=True),
    Route("GET", "/healthz", None),
    Route("GET", "/readyz", None),
    Route("GET", "/metrics", None),
]


def fill(api: Api, route: Route) -> tuple[str, dict[str, Any] | None]:
    """The route's path and body with fresh resources of owner "acme" in its parameters."""
    values: dict[str, Any] = {}
    if "{job_id}" in route.path or route.body == {"job_id": "{job_id}"}:
        job = api.app.enqueue(
            "add", {"x": 1, "y": 2}, created_by="acme", webhook_url=HOOK, breaker_key="c1:p1"
        )
        values["job_id"] = job.id
    if "{event_id}" in route.path:
        job = api.app.enqueue("add", {"x": 1, "y": 1}, created_by="acme", webhook_url=HOOK)
        values["event_id"] = api.app.list_events(job_id=job.id, limit=1)[0].event_id
    if "{key}" in route.path:
        api.app.enqueue("add", {"x": 0, "y": 0}, breaker_key="c1:p1")  # the breaker exists
        values["key"] = "c1:p1"
    if "{alert_id}" in route.path:
        with api.app.driver.transaction() as ex:
            alert = api.app.driver.alert_raise(
                ex, category="backlog", severity="warning", key=uuid.uuid4().hex, context={}
            )
        values["alert_id"] = alert.id
    if "{key_id}" in route.path:
        values["key_id"] = KeyService(api.app).create("temp", "viewer")[0].id
    if "{name}" in route.path:
        values["name"] = "default"
    path = route.path.format(**values)
    body = route.body
    if body is not None:
        body = {k: (values["job_id"] if v == "{job_id}" else v) for k, v in body.items()}
    return path, body


def caller_headers(api: Api, caller: str, disabled_key: str) -> dict[str, str]:
    if caller not in BAD_CALLERS:
        return api.auth(caller)
    admin = api.keys["admin"]
    return {
        "no key": {},
        "disabled key": {"X-API-Key": disabled_key},
        "internal token only": {"X-Internal-Token": INTERNAL_TOKEN},
        "bearer and a wrong X-API-Key": {
            "Authorization": f"Bearer {admin}",
            "X-API-Key": "durq_not-a-real-key",
        },
        "X-API-Key and a wrong bearer": {
            "X-API-Key": admin,
            "Authorization": "Bearer durq_not-a-real-key",
        },
        "X-API-Key and a non-bearer Authorization": {
            "X-API-Key": admin,
            "Authorization": "Basic Z2FyYmFnZQ==",
        },
    }[caller]


def expected_status(route: Route, caller: str) -> tuple[int, str | None]:
    """The status (and error code) ``caller`` must get on ``route``."""
    if route.power is None:
        return 200, None
    if caller in BAD_CALLERS:
        return 401, "E_UNAUTHENTICATED"
    owner, role = KEYS[caller]
    if route.power not in POWERS[role]:
        return 403, "E_FORBIDDEN"
    if route.tenant_scoped and owner != "acme" and "operate" not in POWERS[role]:
        return 404, "E_NOT_FOUND"
    return route.ok, None


def test_every_route_has_a_role_matrix_entry(api: Api) -> None:
    served = {
        (method.upper(), path)
        for path, operations in create_app(api.app).openapi()["paths"].items()
        for method in operations
    }
    table = {(route.method, route.path) for route in ROUTES}
    assert served - table == set(), "routes without a role-matrix row: add them to ROUTES"
    assert table - served == set(), "role-matrix rows for routes the API no longer serves"


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_route_by_role(shared_api: Api, route: Route) -> None:
    """One route, every caller (one database per backend for all routes)."""
    api = shared_api
    service = KeyService(api.app)
    disabled = service.create("acme", "admin")
    service.disable(disabled[0].id)
    for caller in [*BAD_CALLERS, *ROLE_CALLERS]:
        headers = caller_headers(api, caller, disabled[1])
        if route.internal:
            headers = {**headers, "X-Internal-Token": INTERNAL_TOKEN}
        path, body = fill(api, route)
        response = api.client.request(route.method, path, headers=headers, json=body)
        status, code = expected_status(route, caller)
        outcome = (caller, response.status_code, response.text[:300])
        assert response.status_code == status, outcome
        if code is not None:
            assert response.json()["error"]["code"] == code, outcome
        if status == 403:
            assert f"has role {KEYS[caller][1]!r}" in response.json()["error"]["message"]
        if route.power is None:
            continue
        if caller == "disabled key":
            assert "was disabled" in response.json()["error"]["message"]
        if caller.startswith(("bearer and", "X-API-Key and")):
            assert "disagree" in response.json()["error"]["message"], outcome
        if status < 300:
            assert "data" in response.json()


def _not_found_shape(response: Any) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], re.sub(r"\d+", "N", error["message"])


def test_pruned_job_is_gone_to_its_owner_and_not_found_to_others(api: Api) -> None:
    """Another owner's pruned job answers exactly as an id that never existed."""
    job_id = api.submit("producer")["id"]
    api.app.cancel(job_id)
    with api.app.driver.transaction() as ex:
        assert api.app.driver.job_prune(ex, durq.JobState.CANCELLED, -3600.0, 10) == 1
    never = job_id + 10_000
    for route in (r for r in ROUTES if r.tenant_scoped):
        path = route.path.replace("{job_id}", str(job_id))
        unknown = api.call(route.method, route.path.replace("{job_id}", str(never)), "producer")
        for caller in ("producer", "viewer", "operator"):
            if route.power not in POWERS[KEYS[caller][1]]:
                continue
            gone = api.call(route.method, path, caller)
            assert gone.status_code == 410, (route, caller, gone.text)
            assert gone.json()["error"]["code"] == "E_GONE"
        for caller in ("other_producer", "other_viewer"):
            if route.power not in POWERS[KEYS[caller][1]]:
                continue
            hidden = api.call(route.method, path, caller)
            assert _not_found_shape(hidden) == _not_found_shape(unknown), (route, caller)
            assert _not_found_shape(hidden)[:2] == (404, "E_NOT_FOUND")


def test_queue_counts_are_scoped_to_the_tenant(api: Api) -> None:
    for _ in range(2):
        api.submit("producer", queue="acme-q")
    api.submit("other_producer", queue="other-q")
    api.submit("other_producer", queue="acme-q")

    def counts(caller: str) -> dict[str, int]:
        response = api.call("GET", "/v1/queues", caller)
        assert response.status_code == 200, response.text
        return {q["name"]: q["counts"]["queued"] for q in response.json()["data"]}

    assert counts("viewer") == counts("producer") == {"acme-q": 2}
    assert counts("other_viewer") == counts("other_producer") == {"acme-q": 1, "other-q": 1}
    assert counts("operator") == counts("admin") == {"acme-q": 3, "other-q": 1}
    tenant_view = api.call("GET", "/v1/queues", "viewer").json()["data"][0]
    assert tenant_view["ready"] == 2
    assert tenant_view["oldest_age_seconds"] is None  # queue-wide figures are operators'


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
