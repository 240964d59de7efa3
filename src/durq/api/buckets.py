"""Histogram buckets shared by durq's job metrics and an application's own."""

from __future__ import annotations

__all__ = ["DURATION_BUCKETS", "le"]

#: Upper bounds in seconds; ``metrics_attempts`` in api.sql buckets by the same bounds.
DURATION_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)


def le(bound: float) -> str:
    """A bucket bound as Prometheus writes it."""
    return "+Inf" if bound == float("inf") else repr(bound)
