"""A job submitted over HTTP is traced like one enqueued in Python: its enqueue span is
recorded and its trace context stored, so the worker's spans join the same trace."""

from __future__ import annotations

from durq import _tracing

from ..otel.conftest import Recorded
from .conftest import Api


def test_a_submitted_job_gets_an_enqueue_span_and_carries_its_context(api: Api) -> None:
    recorded = Recorded()
    _tracing.use(recorded.provider)
    try:
        response = api.call(
            "POST", "/v1/jobs", "producer", json={"task": "add", "args": {"x": 2, "y": 3}}
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["data"]["id"]
        api.app.work()
    finally:
        _tracing.use(None)
    enqueue = recorded.of_job("durq.enqueue", job_id)
    assert (enqueue.attributes or {})["durq.job.task"] == "add"
    execute = recorded.of_job("durq.execute", job_id)
    assert execute.parent is not None and execute.parent.span_id == enqueue.context.span_id
