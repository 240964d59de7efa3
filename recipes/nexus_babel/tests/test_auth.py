"""US-INFRA-01…03: API keys, the role ladder, RAW mode, bootstrap seeding."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from recipes.nexus_babel.auth import hash_api_key
from recipes.nexus_babel.db import ApiKey
from recipes.nexus_babel.tests.helpers import KEYS, headers

PROTECTED = [
    ("GET", "/api/v1/documents"),
    ("POST", "/api/v1/ingest/batch"),
    ("GET", "/api/v1/auth/whoami"),
]
MUTATING = [  # operator or higher
    ("POST", "/api/v1/ingest/batch", {"paths": ["sonnet_18.txt"]}),
    ("POST", "/api/v1/jobs/submit", {"job_type": "integrity_audit"}),
    ("POST", "/api/v1/jobs/1/cancel", None),
]


def _api_routes(client: TestClient) -> list[tuple[str, str]]:
    """Every /api/v1 operation the service publishes, from its OpenAPI document."""
    paths = client.get("/openapi.json").json()["paths"]
    return [
        (method.upper(), path.replace("{job_id}", "1"))
        for path, operations in paths.items()
        if path.startswith("/api/v1")
        for method in operations
    ]


def test_auth_required_on_protected_routes(client: TestClient) -> None:
    for method, path in PROTECTED:
        response = client.request(method, path)
        assert response.status_code == 401, (method, path)
        assert response.json()["detail"] == "Missing or invalid API key"
    # success criterion "100% route coverage": every /api/v1 route, no key or a wrong one
    routes = _api_routes(client)
    assert len(routes) >= 9
    for method, path in routes:
        for key_headers in ({}, {"X-Nexus-API-Key": "not-a-key"}, {"X-Nexus-API-Key": ""}):
            response = client.request(method, path, headers=key_headers)
            assert response.status_code == 401, (method, path, key_headers)


def test_us_infra_01_api_key_authentication(client: TestClient) -> None:
    db = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        before = session.scalar(select(ApiKey).where(ApiKey.owner == "dev-viewer"))
        assert before is not None and before.last_used_at is None
        # FR-004: only the SHA-256 of the key is stored, never the key itself
        assert before.key_hash == hash_api_key(KEYS["viewer"])
        stored = [tuple(map(str, row)) for row in session.execute(select(ApiKey)).all()]
        assert not any(key in str(stored) for key in KEYS.values())

    response = client.get("/api/v1/auth/whoami", headers=headers("viewer"))
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "api_key_id": before.id,
        "owner": "dev-viewer",
        "role": "viewer",
        "raw_mode_enabled": False,
        "allowed_modes": ["PUBLIC"],
    }
    with db.session() as session:
        after = session.scalar(select(ApiKey).where(ApiKey.owner == "dev-viewer"))
        assert after is not None and after.last_used_at is not None

    with db.session() as session, session.begin():
        session.execute(update(ApiKey).where(ApiKey.owner == "dev-viewer").values(enabled=False))
    assert client.get("/api/v1/auth/whoami", headers=headers("viewer")).status_code == 401


def test_role_and_raw_mode_enforcement(client: TestClient) -> None:
    response = client.post(
        "/api/v1/ingest/batch", headers=headers("viewer"), json={"paths": ["sonnet_18.txt"]}
    )
    assert response.status_code == 403

    raw = {"text": "they left off to build the city; confound their language", "mode": "RAW"}
    assert (
        client.post(
            "/api/v1/governance/evaluate", headers=headers("operator"), json=raw
        ).status_code
        == 403
    )
    response = client.post("/api/v1/governance/evaluate", headers=headers("researcher"), json=raw)
    assert response.status_code == 200
    assert response.json()["mode"] == "RAW" and "confound" in response.json()["text"]

    public = client.post(
        "/api/v1/governance/evaluate", headers=headers("operator"), json=raw | {"mode": "PUBLIC"}
    )
    assert public.status_code == 200 and "confound" not in public.json()["text"]

    who = client.get("/api/v1/auth/whoami", headers=headers("researcher")).json()
    assert who["role"] == "researcher" and who["raw_mode_enabled"] is True
    assert who["allowed_modes"] == ["PUBLIC", "RAW"]


def test_us_infra_02_role_ladder_and_global_raw_flag(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client()
    for method, path, body in MUTATING:
        response = client.request(method, path, headers=headers("viewer"), json=body)
        assert response.status_code == 403, (method, path)
        response = client.request(method, path, headers=headers("operator"), json=body)
        assert response.status_code in (200, 404), (method, path, response.text)
    raw = {"text": "the whole earth", "mode": "RAW"}
    assert (
        client.post("/api/v1/governance/evaluate", headers=headers("admin"), json=raw).status_code
        == 200
    )

    # NEXUS_RAW_MODE_ENABLED=False: RAW is refused whatever the role
    locked = make_client(raw_mode_enabled=False)
    for role in KEYS:
        response = locked.post("/api/v1/governance/evaluate", headers=headers(role), json=raw)
        assert response.status_code == 403, role
    who = locked.get("/api/v1/auth/whoami", headers=headers("admin")).json()
    assert who["allowed_modes"] == ["PUBLIC"]


def test_us_infra_03_bootstrap_keys_seeded_idempotently(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client()
    db = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        rows = {
            k.owner: (k.role, k.raw_mode_enabled, k.enabled)
            for k in session.scalars(select(ApiKey))
        }
    assert rows == {
        "dev-viewer": ("viewer", False, True),
        "dev-operator": ("operator", False, True),
        "dev-researcher": ("researcher", True, True),
        "dev-admin": ("admin", True, True),
    }
    # EC-02: a disabled bootstrap key with a stale RAW flag is repaired on the next start
    with db.session() as session, session.begin():
        session.execute(
            update(ApiKey)
            .where(ApiKey.owner == "dev-researcher")
            .values(enabled=False, raw_mode_enabled=False)
        )
    assert client.get("/api/v1/auth/whoami", headers=headers("researcher")).status_code == 401

    restarted = make_client()  # a second start on the same database
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(ApiKey)) == 4
        researcher = session.scalar(select(ApiKey).where(ApiKey.owner == "dev-researcher"))
        assert researcher is not None and researcher.enabled and researcher.raw_mode_enabled
    who = restarted.get("/api/v1/auth/whoami", headers=headers("researcher"))
    assert who.status_code == 200 and who.json()["allowed_modes"] == ["PUBLIC", "RAW"]
