"""The events over HTTP and in Prometheus: list a job's events, the dead letters,
redeliver (operator only), and the delivery counters."""

from __future__ import annotations

from collections.abc import Callable

import httpx

import durq
from durq.api.keys import KeyService

from ..api.test_sync_mode import serving as serving_api
from ..waiting import wait_until
from .receiver import Receiver, serving
from .test_outbox import delivering


def test_events_over_http_and_metrics(outbox_app: Callable[..., durq.App]) -> None:
    app = outbox_app(webhook_max_attempts=1, api_rate_limit_per_second=0)
    keys = KeyService(app)
    operator = keys.create("ops", "operator")[1]
    viewer = keys.create("ops", "viewer")[1]
    receiver = Receiver(always_fail=True)
    with serving(receiver) as hook, serving_api(app) as base:
        job = app.enqueue("noop", {}, webhook_url=hook)
        with delivering(app):
            wait_until(lambda: app.list_events(state="dead_letter") != [], what="a dead letter")
        (event,) = app.list_events(job_id=job.id)
        op = {"Authorization": f"Bearer {operator}"}
        got = httpx.get(f"{base}/v1/jobs/{job.id}/events", headers=op).json()["data"]
        assert got["counters"] == {
            "execution_attempts": 0,
            "refresh_attempts": 0,
            "delivery_attempts": 1,
        }
        assert [e["event_id"] for e in got["events"]] == [event.event_id]
        dead = httpx.get(f"{base}/v1/events", params={"state": "dead_letter"}, headers=op)
        assert [e["event_id"] for e in dead.json()["data"]] == [event.event_id]
        metrics = httpx.get(f"{base}/metrics").text
        refused = httpx.post(
            f"{base}/v1/events/{event.event_id}/redeliver",
            headers={"Authorization": f"Bearer {viewer}"},
        )
        assert refused.status_code == 403
        assert httpx.post(f"{base}/v1/events/nope/redeliver", headers=op).status_code == 404
        again = httpx.post(f"{base}/v1/events/{event.event_id}/redeliver", headers=op)
        assert again.status_code == 200 and again.json()["data"]["state"] == "pending"
    assert 'durq_webhook_deliveries_total{outcome="dead_letter"} 1.0' in metrics
    assert "durq_webhook_delivery_latency_seconds_bucket" in metrics


def test_events_page_past_the_largest_sequence_is_refused(
    outbox_app: Callable[..., durq.App],
) -> None:
    app = outbox_app(api_rate_limit_per_second=0)
    op = {"Authorization": f"Bearer {KeyService(app).create('ops', 'operator')[1]}"}
    with serving_api(app) as base:
        last = httpx.get(f"{base}/v1/events", params={"after": 2**63 - 1}, headers=op)
        past = httpx.get(f"{base}/v1/events", params={"after": 2**63}, headers=op)
    assert (last.status_code, last.json()["data"]) == (200, [])
    assert past.status_code == 422, past.text
    assert past.json()["error"]["code"] == "E_VALIDATION"
