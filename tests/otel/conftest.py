"""A tracer provider with an in-memory exporter, given to durq for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durq import _tracing


class Recorded:
    """The spans a test's provider finished, by name."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name == name]

    def of_job(self, name: str, job_id: int) -> ReadableSpan:
        found = [s for s in self.named(name) if (s.attributes or {}).get("durq.job.id") == job_id]
        assert len(found) == 1, f"{len(found)} {name} span(s) for job {job_id}: {self.all()}"
        return found[0]


@pytest.fixture
def spans() -> Iterator[Recorded]:
    recorded = Recorded()
    _tracing.use(recorded.provider)
    try:
        yield recorded
    finally:
        _tracing.use(None)
        recorded.provider.shutdown()
