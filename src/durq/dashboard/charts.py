"""Charts drawn on the server as inline SVG: no script, readable with JavaScript off.

Each chart is an ``<svg role="img">`` with a title and a description that says the numbers
in words, so a screen reader gets what the picture shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from markupsafe import Markup

from ..insights import MinuteStats

__all__ = ["latency_chart", "throughput_chart"]

WIDTH, HEIGHT, PAD = 360, 110, 24
OK, FAILED, DEAD, P50, P95 = "#1a7f37", "#9a6700", "#cf222e", "#0969da", "#8250df"


def _frame(label: str, summary: str, body: str, top: str) -> Markup:
    # Every text is escaped here, and ``body`` is shapes built from numbers only.
    return Markup(  # nosec B704
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(label)}</title><desc>{escape(summary)}</desc>"
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - 4}" y2="{HEIGHT - PAD}" '
        'stroke="#57606a" stroke-width="1"/>'
        f'<text x="{PAD}" y="12" font-size="10" fill="#24292f">{escape(top)}</text>'
        f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="10" fill="#24292f">60 min ago</text>'
        f'<text x="{WIDTH - 4}" y="{HEIGHT - 8}" font-size="10" fill="#24292f" '
        'text-anchor="end">now</text>'
        f"{body}</svg>"
    )


def throughput_chart(queue: str, history: Sequence[MinuteStats]) -> Markup:
    """Stacked bars per minute: succeeded, failed (to retry) and dead-lettered attempts."""
    peak = max((m.succeeded + m.failed + m.dead_letter for m in history), default=0) or 1
    slot = (WIDTH - PAD - 4) / max(1, len(history))
    plot = HEIGHT - 2 * PAD
    bars = []
    for i, m in enumerate(history):
        y = float(HEIGHT - PAD)
        for value, colour in ((m.succeeded, OK), (m.failed, FAILED), (m.dead_letter, DEAD)):
            if value:
                h = value / peak * plot
                y -= h
                bars.append(
                    f'<rect x="{PAD + i * slot:.1f}" y="{y:.1f}" width="{max(1.0, slot - 1):.1f}" '
                    f'height="{h:.1f}" fill="{colour}"/>'
                )
    total = [sum(getattr(m, f) for m in history) for f in ("succeeded", "failed", "dead_letter")]
    summary = (
        f"Last hour in queue {queue}: {total[0]} succeeded, {total[1]} failed and retried, "
        f"{total[2]} dead-lettered; busiest minute {peak if any(total) else 0} attempts."
    )
    return _frame(f"Throughput of {queue}", summary, "".join(bars), f"max {peak}/min")


def latency_chart(queue: str, history: Sequence[MinuteStats]) -> Markup:
    """Pickup latency per minute: p50 and p95 lines (ms, due time to claim)."""
    values = [m.pickup_p95_ms for m in history if m.pickup_p95_ms is not None]
    peak = max(values, default=0) or 1
    slot = (WIDTH - PAD - 4) / max(1, len(history))
    plot = HEIGHT - 2 * PAD
    lines = []
    for field, colour in (("pickup_p50_ms", P50), ("pickup_p95_ms", P95)):
        points = [
            f"{PAD + (i + 0.5) * slot:.1f},{HEIGHT - PAD - value / peak * plot:.1f}"
            for i, m in enumerate(history)
            if (value := getattr(m, field)) is not None
        ]
        if len(points) == 1:
            x, y = points[0].split(",")
            lines.append(f'<circle cx="{x}" cy="{y}" r="2" fill="{colour}"/>')
        elif points:
            lines.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                f'points="{" ".join(points)}"/>'
            )
    latest = next((m for m in reversed(history) if m.pickup_p95_ms is not None), None)
    summary = (
        f"Pickup latency in queue {queue}: latest minute p50 {latest.pickup_p50_ms} ms, "
        f"p95 {latest.pickup_p95_ms} ms; highest p95 in the hour {peak} ms."
        if latest is not None
        else f"No pickup latency recorded in queue {queue} in the last hour."
    )
    return _frame(f"Pickup latency of {queue}", summary, "".join(lines), f"max {peak} ms")
