"""OpenTelemetry spans for a job's life: enqueue, claim, execute and finish.

Tracing is on only when a real tracer provider is configured: one passed to :func:`use`,
or the global provider of an application that loaded ``opentelemetry.trace`` and set one
(not the no-op default). Otherwise every hook here is one cheap check, and durq never
imports OpenTelemetry itself, so it need not be installed.

The enqueue span's W3C ``traceparent`` is stored with the job; the claim, execute and
finish spans are its children, in whatever process runs the job.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ._drivers import Driver, Executor, NewJob
from .retry import Snooze
from .states import Success
from .types import Job

__all__ = [
    "Enqueueing",
    "Executing",
    "active",
    "attributes",
    "claimed",
    "enqueuing",
    "executing",
    "finished",
    "now_ns",
    "tracer",
    "use",
]

#: The provider passed to :func:`use` (None: the global one).
_provider: Any = None
#: ``(provider, tracer)`` last handed out, so a tracer is made once per provider.
_cached: tuple[Any, Any] | None = None


def use(provider: Any) -> None:
    """Trace with ``provider`` (an OpenTelemetry ``TracerProvider``); None: the global one."""
    global _provider
    _provider = provider


def _current_provider() -> Any:
    if _provider is not None:
        return _provider
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nobody configured OpenTelemetry in this process
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def tracer() -> Any:
    """durq's tracer, or None when tracing is off."""
    global _cached
    provider = _current_provider()
    if provider is None:
        return None
    cached = _cached
    if cached is None or cached[0] is not provider:
        cached = _cached = (provider, provider.get_tracer("durq"))
    return cached[1]


def active() -> bool:
    return tracer() is not None


def now_ns() -> int | None:
    """The time a span will start at, or None when tracing is off."""
    return time.time_ns() if active() else None


def attributes(job: Job) -> dict[str, Any]:
    return {
        "durq.job.id": job.id,
        "durq.job.task": job.task,
        "durq.job.queue": job.queue,
        "durq.job.attempt": job.attempt,
    }


def _traceparent(span: Any) -> str | None:
    from opentelemetry.trace import set_span_in_context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=set_span_in_context(span))
    return carrier.get("traceparent")


def _parent(traceparent: str | None) -> Any:
    """The context a job's span starts in: its enqueue span's, or the current one."""
    if traceparent is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _kind(name: str) -> Any:
    from opentelemetry.trace import SpanKind

    return getattr(SpanKind, name)


def _record_error(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


# ---- enqueue -------------------------------------------------------------------------


class Enqueueing:
    """The jobs to insert (with their trace context when traced), and the spans' ends."""

    def __init__(self, jobs: Sequence[NewJob], spans: Sequence[Any] = ()) -> None:
        self.jobs = list(jobs)
        self.spans = list(spans)

    def inserted(self, jobs: Sequence[Job]) -> None:
        if not self.spans:
            return
        for span, job in zip(self.spans, jobs, strict=True):
            span.set_attributes(attributes(job))


@contextmanager
def enqueuing(news: Sequence[NewJob]) -> Iterator[Enqueueing]:
    """One producer span per job, a child of the caller's current span; each job carries
    its span's ``traceparent``."""
    t = tracer()
    if t is None:
        yield Enqueueing(news)
        return
    spans = [
        t.start_span(
            "durq.enqueue",
            kind=_kind("PRODUCER"),
            attributes={"durq.job.task": new.task, "durq.job.queue": new.queue},
        )
        for new in news
    ]
    stamped = [
        replace(new, trace_context=_traceparent(span))
        for new, span in zip(news, spans, strict=True)
    ]
    try:
        yield Enqueueing(stamped, spans)
    except BaseException as exc:
        for span in spans:
            _record_error(span, exc)
        raise
    finally:
        for span in spans:
            span.end()


# ---- claim ---------------------------------------------------------------------------


def claimed(
    driver: Driver, ex: Executor, jobs: Sequence[Job], started: int | None, worker_id: str
) -> dict[int, str]:
    """Record a claim span per job (from ``started``, see :func:`now_ns`); returns each
    traced job's ``traceparent`` for its execute and finish spans. Nothing when off."""
    t = tracer()
    if t is None or not jobs:
        return {}
    contexts = driver.job_trace_context(ex, [job.id for job in jobs])
    for job in jobs:
        span = t.start_span(
            "durq.claim",
            context=_parent(contexts.get(job.id)),
            kind=_kind("CONSUMER"),
            attributes={**attributes(job), "durq.worker.id": worker_id},
            start_time=started,
        )
        span.end()
    return contexts


# ---- execute -------------------------------------------------------------------------


class Executing:
    """Takes the execution's outcome onto its span (nothing when tracing is off)."""

    def __init__(self, span: Any = None) -> None:
        self.span = span

    def outcome(self, outcome: object) -> None:
        if self.span is None:
            return
        if isinstance(outcome, BaseException):
            self.span.set_attribute("durq.job.outcome", type(outcome).__name__)
            if not isinstance(outcome, Snooze):  # a snooze is a plan, not a failure
                _record_error(self.span, outcome)
        else:
            self.span.set_attribute(
                "durq.job.outcome", "success" if isinstance(outcome, Success) else "lost"
            )


_NOT_TRACED = Executing()


@contextmanager
def executing(job: Job, traceparent: str | None) -> Iterator[Executing]:
    """The span a job runs in (current while it runs, so the task's own spans nest)."""
    t = tracer()
    if t is None:
        yield _NOT_TRACED
        return
    with t.start_as_current_span(
        "durq.execute",
        context=_parent(traceparent),
        kind=_kind("CONSUMER"),
        attributes=attributes(job),
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield Executing(span)


# ---- finish --------------------------------------------------------------------------


def finished(job: Job, traceparent: str | None, state: str, started: int | None) -> None:
    """Record the span of a job's outcome write, ``state`` being what it left the job in
    (``lease_lost`` when nothing was written)."""
    t = tracer()
    if t is None:
        return
    span = t.start_span(
        "durq.finish",
        context=_parent(traceparent),
        kind=_kind("INTERNAL"),
        attributes={**attributes(job), "durq.job.state": state},
        start_time=started,
    )
    span.end()
