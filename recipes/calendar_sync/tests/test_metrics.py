"""Seed 004 "Metrics": /metrics exports the four sync_* metrics with their labels."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from recipes.calendar_sync import FakeProvider, ScheduleRequest
from recipes.calendar_sync.service import QUEUE

from .conftest import sync_of
from .helpers import make_due
from .test_worker import _request


def _scrape(client: TestClient) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    types = {}
    for family in text_string_to_metric_families(response.text):
        types[family.name] = family.type
        families[family.name] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples
        }
    assert types == {
        "sync_jobs": "counter",
        "sync_jobs_queue_depth": "gauge",
        "sync_job_duration_seconds": "histogram",
        "sync_job_retries": "counter",
    }, "exactly the seed's four metrics"
    return families


def test_metrics_exported_with_expected_names_and_labels(
    make_client: Callable[..., TestClient], provider: FakeProvider, db_url: str
) -> None:
    client = make_client()
    sync = sync_of(client)
    ok_conn, bad_conn = str(uuid.uuid4()), str(uuid.uuid4())
    bad_pair = str(uuid.uuid4())
    provider.fail_pair(bad_pair)

    def request(pair: str, connector: str, hour: int) -> ScheduleRequest:
        base = _request(pair, hour)
        return ScheduleRequest(
            base.pair_id, base.window_start, base.window_end, connector_id=uuid.UUID(connector)
        )

    sync.schedule(request(str(uuid.uuid4()), ok_conn, 9))
    sync.schedule(request(str(uuid.uuid4()), ok_conn, 10))
    (failing,) = sync.schedule(request(bad_pair, bad_conn, 9))
    sync.schedule(request(str(uuid.uuid4()), ok_conn, 11))
    first = sync.app.work(queues=[QUEUE], limit=3, batch=1)
    assert len(first) == 3
    make_due(db_url, failing.id)
    sync.app.run_job(failing.id)  # the second attempt: one retry, failed again

    m = _scrape(client)
    assert m["sync_jobs"] == {
        ("sync_jobs_total", (("connector_id", ok_conn), ("status", "completed"))): 2.0,
        ("sync_jobs_total", (("connector_id", ok_conn), ("status", "pending"))): 1.0,
        ("sync_jobs_total", (("connector_id", bad_conn), ("status", "retrying"))): 1.0,
    }
    assert m["sync_jobs_queue_depth"] == {
        ("sync_jobs_queue_depth", (("status", "pending"),)): 1.0,
        ("sync_jobs_queue_depth", (("status", "in_progress"),)): 0.0,
        ("sync_jobs_queue_depth", (("status", "retrying"),)): 1.0,
    }
    assert m["sync_job_retries"] == {
        ("sync_job_retries_total", (("connector_id", ok_conn),)): 0.0,
        ("sync_job_retries_total", (("connector_id", bad_conn),)): 1.0,
    }
    duration = m["sync_job_duration_seconds"]
    counts = {
        dict(labels)["outcome"]: value
        for (name, labels), value in duration.items()
        if name == "sync_job_duration_seconds_count"
    }
    assert counts == {"success": 2.0, "failure": 2.0}
    label_names = {tuple(k for k, _ in labels) for (_, labels) in duration}
    assert label_names == {("outcome",), ("le", "outcome")}
    assert ("sync_job_duration_seconds_bucket", (("le", "+Inf"), ("outcome", "success"))) in (
        duration
    )
