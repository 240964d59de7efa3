"""Circuit breakers, on both backends: a paused key never blocks other keys, the claim stays
an index scan, one half-open probe decides, alerts are raised once and resolved."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import durq
from durq import BreakerOpen, BreakerRule

from ..waiting import wait_until

Q = "brk"


def _app(make_app: Callable[..., durq.App], mode: dict[str, bool]) -> durq.App:
    app = make_app()

    @app.task(name="call_provider", queue=Q, retry=durq.Fixed([0]), max_attempts=50)
    def call_provider(n: int = 0) -> dict[str, Any]:
        if mode["fail"]:
            raise RuntimeError("provider down")
        return {"n": n}

    return app


def _claim(app: durq.App, limit: int) -> list[durq.Job]:
    with app.driver.transaction() as ex:
        return app.driver.job_claim(ex, queue=Q, worker_id="probe", limit=limit, lease_seconds=30)


def _open_breaker(app: durq.App, key: str, backlog: int) -> None:
    app.enqueue_many(
        durq.EnqueueRequest("call_provider", {"n": i}, breaker_key=key) for i in range(backlog)
    )
    ran = app.work(queues=[Q], batch=1)
    assert len(ran) == 5, "exactly the threshold of failures runs before the key pauses"
    breaker = app.get_breaker(key)
    assert breaker.state == "open" and breaker.consecutive_failures == 5


def test_breaker_paused_key_does_not_block_other_keys(
    make_app: Callable[..., durq.App], db_url: str
) -> None:
    app = _app(make_app, {"fail": True})
    _open_breaker(app, "paused", backlog=10_000)
    healthy = [
        app.enqueue("call_provider", {"n": i}, breaker_key="healthy", priority=5) for i in range(10)
    ]
    # The paused key's 10,000 jobs sort first (priority 0); one claim still takes all 10.
    claimed = _claim(app, limit=10)
    assert sorted(j.id for j in claimed) == sorted(j.id for j in healthy)
    assert _claim(app, limit=10) == []
    if db_url.startswith("postgresql"):
        _assert_claim_is_index_scan(app, db_url)


def _assert_claim_is_index_scan(app: durq.App, db_url: str) -> None:
    sql = app.driver.queries.pyformat["job_claim"]
    params = {"queue": Q, "worker_id": "plan", "limit": 10, "lease_seconds": 30.0, "now": None}
    with psycopg.connect(db_url) as conn:
        conn.execute("ANALYZE durq_jobs")
        row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
        conn.rollback()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])

    def nodes(n: dict[str, Any]) -> list[dict[str, Any]]:
        return [n, *(m for child in n.get("Plans", []) for m in nodes(child))]

    on_jobs = {
        (n["Node Type"], n.get("Index Name"))
        for n in nodes(plan[0]["Plan"])
        if n.get("Relation Name") == "durq_jobs"
    }
    assert ("Seq Scan", None) not in on_jobs, on_jobs
    assert any(i == "durq_jobs_ready_idx" for _, i in on_jobs), on_jobs


def test_breaker_open_refuses_enqueue_with_alert_context(make_app: Callable[..., durq.App]) -> None:
    app = _app(make_app, {"fail": True})
    _open_breaker(app, "conn-1:pair-1", backlog=6)
    before = len(app.list_jobs(limit=100))
    with pytest.raises(BreakerOpen) as caught:
        app.enqueue("call_provider", {"n": 99}, breaker_key="conn-1:pair-1")
    assert caught.value.code == "E_BREAKER_OPEN"
    assert caught.value.alert is not None
    assert caught.value.alert["context"]["consecutive_failures"] == 5
    assert "durq breakers reset" in str(caught.value)
    assert len(app.list_jobs(limit=100)) == before, "a refused enqueue writes nothing"


def test_breaker_half_open_probe(make_app: Callable[..., durq.App]) -> None:
    mode = {"fail": True}
    app = _app(make_app, mode)
    app.breakers["probe-*"] = BreakerRule(threshold=5, pause=1.5)
    _open_breaker(app, "probe-key", backlog=8)
    assert _claim(app, limit=10) == [], "nothing of an open key is claimable"

    def half_open() -> bool:
        return app.get_breaker("probe-key").state == "half_open"

    # The pause ends: one probe (and only one) is claimable; it fails and re-opens the key.
    wait_until(half_open, what="the pause to end", interval=0.01)
    ran = app.work(queues=[Q], batch=10)
    assert len(ran) == 1, "one probe runs while the breaker is half-open"
    reopened = app.get_breaker("probe-key")
    assert reopened.state == "open" and reopened.opened_count == 2
    alerts = app.list_alerts(state="open")
    assert len(alerts) == 1 and alerts[0].count == 2, "the alert is deduplicated while open"

    # Next pause: the probe succeeds, the breaker closes, the parked jobs all run.
    wait_until(half_open, what="the second pause to end", interval=0.01)
    mode["fail"] = False
    ran = app.work(queues=[Q], batch=10)
    assert len(ran) == 8 and all(j.state == "succeeded" for j in ran)
    closed = app.get_breaker("probe-key")
    assert closed.state == "closed" and closed.consecutive_failures == 0
    assert app.list_alerts(state="open") == []
    (resolved,) = app.list_alerts(state="resolved")
    assert resolved.category == "circuit_breaker" and resolved.key == "probe-key"


def test_alert_dedupe_and_resolve_by_reset(make_app: Callable[..., durq.App]) -> None:
    app = _app(make_app, {"fail": True})
    _open_breaker(app, "k", backlog=7)
    (alert,) = app.list_alerts()
    assert (alert.category, alert.severity, alert.key, alert.count) == (
        "circuit_breaker",
        "warning",
        "k",
        1,
    )
    acked = app.ack_alert(alert.id)
    assert acked.acked_at is not None and acked.open
    app.reset_breaker("k")
    assert app.list_alerts(state="open") == []
    assert app.get_breaker("k").state == "closed"
    assert len(_claim(app, limit=10)) == 7, "a reset makes every parked job due now"


def test_dead_letter_raises_an_alert_without_secrets(make_app: Callable[..., durq.App]) -> None:
    app = make_app()

    @app.task(name="leaky", retry=durq.Fixed([0]), max_attempts=2)
    def leaky(token: str) -> None:
        raise RuntimeError(f"refused token {token}")

    for _ in range(2):
        app.enqueue("leaky", {"token": "s3cr3t"})
    app.work(queues=["default"])
    (alert,) = app.list_alerts()
    assert (alert.category, alert.key, alert.count) == ("dead_letter", "leaky", 2)
    assert "s3cr3t" not in json.dumps(alert.to_dict())
