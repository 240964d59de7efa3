"""Backlog guardrails with synthetic ages, on both backends: a queue over a guardrail for
the sustain time raises one alert (and one WARNING), shows in /v1/queues and the gauge,
and resolves itself when the backlog clears."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

import durq
from durq._maintenance import guardrails
from durq._maintenance.loop import Maintenance
from durq.api.metrics import Metrics

from ..drivers.helpers import PlainSql

Q = "backlog"


def _age(sql: PlainSql, db_url: str, seconds: float) -> None:
    """Make every ready job of the queue ``seconds`` old (due that long ago)."""
    if db_url.startswith("postgresql"):
        sql.rows(
            "UPDATE durq_jobs SET run_at = now() - make_interval(secs => :s) WHERE queue = :q",
            s=seconds,
            q=Q,
        )
    else:
        sql.rows("UPDATE durq_jobs SET run_at = :t WHERE queue = :q", t=time.time() - seconds, q=Q)


def _degraded_for(sql: PlainSql, db_url: str, seconds: float) -> None:
    if db_url.startswith("postgresql"):
        sql.rows(
            "UPDATE durq_queues SET degraded_since = now() - make_interval(secs => :s) "
            "WHERE name = :q",
            s=seconds,
            q=Q,
        )
    else:
        sql.rows(
            "UPDATE durq_queues SET degraded_since = :t WHERE name = :q",
            t=time.time() - seconds,
            q=Q,
        )


def _gauge(app: durq.App) -> float | None:
    text = Metrics(app).render().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "durq_queue_degraded":
            for sample in family.samples:
                if sample.labels == {"queue": Q}:
                    return float(sample.value)
    return None


@pytest.fixture
def sql(db_url: str) -> Iterator[PlainSql]:
    plain = PlainSql(db_url)
    yield plain
    plain.close()


def test_guardrail_thresholds_with_synthetic_ages(
    make_app: Callable[..., durq.App],
    db_url: str,
    sql: PlainSql,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = make_app()  # the defaults: p95 age 900 s, 500 ready, sustained 900 s
    for i in range(20):
        app.enqueue("t", {"n": i}, queue=Q, unchecked=True)

    # Just under the age guardrail: healthy.
    _age(sql, db_url, 850)
    assert guardrails.run_once(app.driver, app.settings).degraded == []
    assert app.queue_stats()[Q]["degraded"] is False and _gauge(app) == 0

    # Over it: degraded now (flag, gauge), but no alert before it is sustained.
    _age(sql, db_url, 1000)
    maintenance = Maintenance(app.driver, app.settings, "guard-test", reclaim_interval=60)
    maintenance.step()  # the leader's round runs the guardrails
    assert app.queue_stats()[Q]["degraded"] is True and _gauge(app) == 1
    assert app.list_alerts() == []

    # Sustained for 15 minutes: one alert, one WARNING, however many rounds see it.
    _degraded_for(sql, db_url, 901)
    with caplog.at_level(logging.WARNING, logger="durq.maintenance"):
        first = guardrails.run_once(app.driver, app.settings)
        second = guardrails.run_once(app.driver, app.settings)
    assert (first.alerted, second.alerted) == ([Q], [])
    warnings = [r for r in caplog.records if "degraded" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert getattr(warnings[0], "queue", None) == Q
    (alert,) = app.list_alerts()
    assert (alert.category, alert.severity, alert.key, alert.count) == (
        "queue_backlog",
        "warning",
        Q,
        1,
    )
    assert alert.context["ready"] == 20 and alert.context["p95_age_seconds"] > 900
    assert alert.context["degraded_for_seconds"] >= 900

    # The backlog clears: the alert resolves itself and the mark is gone.
    _age(sql, db_url, 0)
    cleared = guardrails.run_once(app.driver, app.settings)
    assert cleared.resolved == [Q] and cleared.degraded == []
    assert app.list_alerts() == [] and len(app.list_alerts(state="resolved")) == 1
    assert _gauge(app) == 0


def test_guardrail_ready_count_threshold(
    make_app: Callable[..., durq.App], db_url: str, sql: PlainSql
) -> None:
    app = make_app(degraded_ready_count=5, degraded_sustain_seconds=0)
    for i in range(5):
        app.enqueue("t", {"n": i}, queue=Q, unchecked=True)
    assert guardrails.run_once(app.driver, app.settings).alerted == []  # 5 is not over 5
    app.enqueue("t", {"n": 5}, queue=Q, unchecked=True)
    assert guardrails.run_once(app.driver, app.settings).alerted == [Q]
    (alert,) = app.list_alerts()
    assert alert.context["ready"] == 6 and alert.context["max_ready"] == 5
    for job in app.list_jobs(queue=Q, limit=100)[:2]:
        app.cancel(job.id)
    assert guardrails.run_once(app.driver, app.settings).resolved == [Q]
