"""OpenTelemetry: a job's enqueue, claim, execute and finish spans, in one trace from the
caller's span to the outcome, whether the job runs inline or in a worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import durq
from durq import _tracing

from ..worker.support import running_worker, wait_until
from .conftest import Recorded


def traced_app(db_url: str, recorded: Recorded) -> durq.App:
    app = durq.App(db_url)
    inner = recorded.provider.get_tracer("the task")

    @app.task
    def add(a: int, b: int) -> int:
        with inner.start_as_current_span("inside add"):
            return a + b

    @app.task
    async def add_later(a: int, b: int) -> int:
        with inner.start_as_current_span("inside add_later"):
            await asyncio.sleep(0)
            return a + b

    @app.task(max_attempts=1)
    def explode() -> None:
        raise KeyError("missing")

    return app


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def assert_one_trace(recorded: Recorded, job: durq.Job, caller: ReadableSpan, state: str) -> None:
    """The job's spans: enqueue under the caller, claim, execute and finish under enqueue."""
    enqueue = recorded.of_job("durq.enqueue", job.id)
    assert parent_id(enqueue) == caller.context.span_id
    assert enqueue.kind is SpanKind.PRODUCER
    for name in ("durq.claim", "durq.execute", "durq.finish"):
        span = recorded.of_job(name, job.id)
        assert span.context.trace_id == caller.context.trace_id, name
        assert parent_id(span) == enqueue.context.span_id, name
        attrs = dict(span.attributes or {})
        assert attrs["durq.job.task"] == job.task and attrs["durq.job.queue"] == job.queue
        assert attrs["durq.job.attempt"] == 1, name
    assert recorded.of_job("durq.execute", job.id).kind is SpanKind.CONSUMER
    assert (recorded.of_job("durq.finish", job.id).attributes or {})["durq.job.state"] == state


def test_enqueue_span_is_a_child_of_the_callers_span(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)
    with spans.provider.get_tracer("caller").start_as_current_span("request") as caller:
        job = app.enqueue("add", {"a": 1, "b": 2}, queue="sums")
    enqueue = spans.of_job("durq.enqueue", job.id)
    assert parent_id(enqueue) == caller.get_span_context().span_id
    assert enqueue.context.trace_id == caller.get_span_context().trace_id
    assert dict(enqueue.attributes or {}) == {
        "durq.job.id": job.id,
        "durq.job.task": "add",
        "durq.job.queue": "sums",
        "durq.job.attempt": 0,
    }
    with app.driver.read() as ex:
        stored = app.driver.job_trace_context(ex, [job.id])
    ctx = enqueue.context
    traceparent = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert stored == {job.id: traceparent}
    app.close()


def test_work_runs_each_job_in_its_enqueue_trace(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)
    with spans.provider.get_tracer("caller").start_as_current_span("request"):
        one = app.enqueue("add", {"a": 1, "b": 2})
        many = app.enqueue_many([("add", {"a": 3, "b": 4}), ("add_later", {"a": 5, "b": 6})])
    caller = spans.named("request")[0]
    assert [job.state for job in app.work()] == ["succeeded"] * 3
    for job in [one, *many]:
        assert_one_trace(spans, job, caller, "succeeded")
    execute = spans.of_job("durq.execute", many[1].id)
    (inner,) = spans.named("inside add_later")
    assert parent_id(inner) == execute.context.span_id  # the task's own spans nest
    app.close()


def test_a_failed_attempt_marks_its_execute_span_as_an_error(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)
    with spans.provider.get_tracer("caller").start_as_current_span("request"):
        job = app.enqueue("explode")
    app.run_job(job.id)
    assert_one_trace(spans, job, spans.named("request")[0], "dead_letter")
    execute = spans.of_job("durq.execute", job.id)
    assert execute.status.status_code is StatusCode.ERROR
    assert (execute.attributes or {})["durq.job.outcome"] == "KeyError"
    assert [event.name for event in execute.events] == ["exception"]
    app.close()


def test_a_snooze_is_not_an_error(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)

    @app.task
    def later() -> None:
        raise durq.Snooze(60)

    job = app.enqueue("later")
    app.run_job(job.id)
    execute = spans.of_job("durq.execute", job.id)
    assert (execute.attributes or {})["durq.job.outcome"] == "Snooze"
    assert execute.status.status_code is StatusCode.UNSET
    assert (spans.of_job("durq.finish", job.id).attributes or {})["durq.job.state"] == "queued"
    app.close()


def test_a_refused_enqueue_marks_its_span_as_an_error(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)
    app.enqueue("add", {"a": 1, "b": 2}, idempotency_key="k")
    with pytest.raises(durq.IdempotencyConflict):
        app.enqueue("add", {"a": 1, "b": 3}, idempotency_key="k")
    first, refused = spans.named("durq.enqueue")
    assert first.status.status_code is StatusCode.UNSET
    assert refused.status.status_code is StatusCode.ERROR
    assert "durq.job.id" not in (refused.attributes or {})
    app.close()


def test_a_worker_runs_each_job_in_its_enqueue_trace(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)
    with spans.provider.get_tracer("caller").start_as_current_span("request"):
        jobs = [
            app.enqueue("add", {"a": 1, "b": 2}),
            app.enqueue("add_later", {"a": 3, "b": 4}),
            app.enqueue("explode"),
            *app.enqueue_many([("add", {"a": i, "b": i}) for i in range(3)]),
        ]
    caller = spans.named("request")[0]
    with running_worker(app, concurrency=4, poll_interval=0.05) as worker:
        wait_until(lambda: len(spans.named("durq.finish")) == len(jobs), what="6 finish spans")
        worker_id = worker.worker_id
        # Traced claims read the trace contexts on a pooled connection, in a thread.
        assert worker.producer is not None and worker.producer.loop_claims == 0
    for job in jobs:
        assert_one_trace(
            spans, job, caller, "dead_letter" if job.task == "explode" else "succeeded"
        )
        claim = spans.of_job("durq.claim", job.id)
        assert (claim.attributes or {})["durq.worker.id"] == worker_id
    for task, job in (("add", jobs[0]), ("add_later", jobs[1])):  # a thread, the loop
        execute = spans.of_job("durq.execute", job.id)
        inner = [
            s for s in spans.named(f"inside {task}") if parent_id(s) == execute.context.span_id
        ]
        assert len(inner) == 1, f"the {task} task's own span is not under its execute span"
    app.close()


def test_a_job_enqueued_outside_any_trace_starts_its_own(db_url: str, spans: Recorded) -> None:
    app = traced_app(db_url, spans)
    job = app.enqueue("add", {"a": 1, "b": 2})
    app.work()
    enqueue = spans.of_job("durq.enqueue", job.id)
    assert enqueue.parent is None
    assert parent_id(spans.of_job("durq.execute", job.id)) == enqueue.context.span_id
    app.close()


def test_without_a_provider_nothing_is_traced(db_url: str) -> None:
    recorded = Recorded()  # a provider nobody gave to durq, nor set as the global one
    assert not _tracing.active()
    app = traced_app(db_url, recorded)
    with recorded.provider.get_tracer("caller").start_as_current_span("request"):
        job = app.enqueue("add", {"a": 1, "b": 2})
        app.enqueue_many([("add", {"a": 3, "b": 4})])
    assert [j.state for j in app.work()] == ["succeeded", "succeeded"]
    assert [span.name for span in recorded.all()] == ["request", "inside add", "inside add"]
    with app.driver.read() as ex:
        assert app.driver.job_trace_context(ex, [job.id]) == {}
    app.close()


def test_use_takes_the_provider_and_none_gives_it_back(spans: Recorded) -> None:
    assert _tracing.active()
    _tracing.use(None)
    assert not _tracing.active()
    _tracing.use(spans.provider)
    assert _tracing.active()


def test_the_readme_names_every_span_and_attribute(sqlite_url: str, spans: Recorded) -> None:
    app = traced_app(sqlite_url, spans)
    app.enqueue("add", {"a": 1, "b": 2})
    app.enqueue("explode")
    app.work()
    ours = [span for span in spans.all() if span.name.startswith("durq.")]
    names = {span.name for span in ours}
    keys = {key for span in ours for key in span.attributes or {}}
    assert names == {"durq.enqueue", "durq.claim", "durq.execute", "durq.finish"}
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Tracing", 1)[1].split("\n## ", 1)[0]
    missing = sorted(name for name in names | keys if f"`{name}`" not in section)
    assert missing == [], f"the README's Tracing section does not name {missing}"
    app.close()
