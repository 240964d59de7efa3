"""US-INFRA-23: structured JSON logs with request and job ids, and OpenTelemetry spans.

Logs go through durq's one logging setup (``durq.logs``), so the worker's own lines and the
platform's share a shape: JSON lines with ``timestamp``, ``level``, ``logger``, ``event``
and the ids bound where they were written (``request_id``; ``job_id``, ``job_type``,
``attempt``, ``worker_id`` inside a job), secrets redacted.

Spans come from OpenTelemetry's API: the tracer provider given to ``create_app`` or
``run_worker``, else the global one (none configured: nothing is recorded). durq traces
with the global provider: a request's span is the parent of the job's ``durq.enqueue``
span, and the job's own span nests under ``durq.execute``, in whichever process runs it.
"""

from __future__ import annotations

from opentelemetry import trace

import durq.logs

from .config import Settings

__all__ = ["TRACER_NAME", "configure_logging", "get_tracer"]

TRACER_NAME = "nexus_babel"


def get_tracer(provider: trace.TracerProvider | None = None) -> trace.Tracer:
    """The recipe's tracer from ``provider``, else from the global provider."""
    return trace.get_tracer(TRACER_NAME, tracer_provider=provider)


def configure_logging(settings: Settings) -> None:
    """Route the platform's and durq's log lines through durq's one formatter."""
    if settings.log_format != "off":
        durq.logs.configure(settings.log_level, settings.log_format)
