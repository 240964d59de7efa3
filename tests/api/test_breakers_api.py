"""The breaker and alert routes on both backends: list, reset (operator), alerts by state,
acknowledge; a paused key answers 409 ``E_BREAKER_OPEN`` with its alert."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

import durq

from .conftest import Api


def _open(app: durq.App, key: str) -> None:
    @app.task(name="sync_pair", retry=durq.Fixed([0]), max_attempts=50)
    def sync_pair() -> None:
        raise RuntimeError("provider down")

    for _ in range(6):
        app.enqueue("sync_pair", breaker_key=key)
    app.work(queues=["default"], batch=1)


def test_breaker_routes_reset_and_alerts(make_api: Callable[..., Api]) -> None:
    api = make_api()
    _open(api.app, "c1:p1")
    with pytest.raises(durq.BreakerOpen) as caught:
        api.app.enqueue("sync_pair", breaker_key="c1:p1")
    assert caught.value.alert is not None and caught.value.alert["key"] == "c1:p1"

    listed = api.call("GET", "/v1/breakers", "viewer").json()["data"]
    assert [(b["key"], b["state"], b["consecutive_failures"]) for b in listed] == [
        ("c1:p1", "open", 5)
    ]
    (alert,) = api.call("GET", "/v1/alerts?state=open", "viewer").json()["data"]
    assert (alert["category"], alert["severity"], alert["key"]) == (
        "circuit_breaker",
        "warning",
        "c1:p1",
    )
    assert api.call("POST", "/v1/breakers/c1:p1/reset", "viewer").status_code == 403
    missing = api.call("POST", "/v1/breakers/nope/reset", "operator")
    assert missing.status_code == 404 and "durq breakers list" in missing.json()["error"]["message"]
    acked = api.call("POST", f"/v1/alerts/{alert['id']}/ack", "operator").json()["data"]
    assert acked["acked_at"] is not None and acked["state"] == "open"
    reset = api.call("POST", "/v1/breakers/c1:p1/reset", "operator").json()["data"]
    assert reset["state"] == "closed" and reset["consecutive_failures"] == 0
    assert api.call("GET", "/v1/alerts?state=open", "viewer").json()["data"] == []
    (resolved,) = api.call("GET", "/v1/alerts?state=resolved", "viewer").json()["data"]
    assert resolved["id"] == alert["id"]
    assert api.call("GET", "/v1/alerts?state=bogus", "viewer").status_code == 422


def test_alert_ack_of_an_unknown_or_out_of_range_id(make_api: Callable[..., Api]) -> None:
    api = make_api()
    missing = api.call("POST", "/v1/alerts/42/ack", "operator")
    assert missing.status_code == 404
    for too_big in (2**63, 2**63 + 1):  # past any stored id: refused, never a 500
        refused = api.call("POST", f"/v1/alerts/{too_big}/ack", "operator")
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "E_VALIDATION"


def test_submit_takes_breaker_and_concurrency_keys(make_api: Callable[..., Api]) -> None:
    api = make_api()
    api.app.limits["tenant-*"] = durq.Limit(concurrency=1)
    job = api.submit(breaker_key="c9:p9", concurrency_key="tenant-a")
    assert (job["breaker_key"], job["concurrency_key"]) == ("c9:p9", "tenant-a")
    stored = api.app.get_job(job["id"])
    assert (stored.breaker_key, stored.concurrency_key) == ("c9:p9", "tenant-a")
    assert [(s.key, s.concurrency) for s in api.app.list_limits()] == [("tenant-a", 1)]
    plain = api.submit()
    assert (plain["breaker_key"], plain["concurrency_key"]) == (None, None)

    _open(api.app, "c1:p1")
    paused = api.call(
        "POST", "/v1/jobs", "producer", json={"task": "sync_pair", "breaker_key": "c1:p1"}
    )
    assert paused.status_code == 409, paused.text
    error = paused.json()["error"]
    assert error["code"] == "E_BREAKER_OPEN"
    (detail,) = error["details"]
    assert detail["key"] == "c1:p1" and detail["alert"]["key"] == "c1:p1"
    for bad in ("", " ", "x" * 256):
        refused = api.call("POST", "/v1/jobs", "producer", json={"task": "add", "breaker_key": bad})
        assert refused.status_code == 422, (bad, refused.text)


def test_metrics_export_breaker_state_and_transitions(make_api: Callable[..., Api]) -> None:
    api = make_api()
    before = _scrape(api)
    assert before[("durq_breakers_open", frozenset())] == 0
    assert before[("durq_breaker_transitions_total", frozenset({("to", "open")}))] == 0
    _open(api.app, "c1:p1")

    @api.app.task(name="flaky_pair", retry=durq.Fixed([0]), max_attempts=50)
    def flaky_pair() -> None:
        raise RuntimeError("one failure")

    api.app.enqueue("flaky_pair", breaker_key="c2:p2")
    api.app.work(queues=["default"], batch=1, limit=1)  # one failure: still closed
    samples = _scrape(api)
    assert samples[("durq_breaker_open", frozenset({("key", "c1:p1")}))] == 1
    assert samples[("durq_breaker_open", frozenset({("key", "c2:p2")}))] == 0
    assert samples[("durq_breakers_open", frozenset())] == 1
    assert samples[("durq_breaker_transitions_total", frozenset({("to", "open")}))] == 1
    api.app.reset_breaker("c1:p1")
    after = _scrape(api)
    assert ("durq_breaker_open", frozenset({("key", "c1:p1")})) not in after  # clean again
    assert after[("durq_breakers_open", frozenset())] == 0
    assert after[("durq_breaker_transitions_total", frozenset({("to", "open")}))] == 1


def _scrape(api: Api) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = api.client.get("/metrics")
    assert response.status_code == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
