"""The per-minute rollup that the overview's charts read, kept by maintenance."""

from __future__ import annotations

import time

import durq
from durq import testing
from durq._maintenance import rollup


def _app_with_tasks(app: durq.App) -> None:
    @app.task(queue="mail", max_attempts=1)
    def ok(n: int) -> int:
        return n

    @app.task(queue="mail", max_attempts=1)
    def bad(n: int) -> None:
        raise durq.Fail("E_BAD", "bad input")


def test_rollup_counts_attempts_by_minute_and_queue(app: durq.App) -> None:
    app.migrate()
    _app_with_tasks(app)
    for n in range(3):
        app.enqueue("ok", {"n": n})
    app.enqueue("bad", {"n": 9})
    testing.drain(app)
    next_from = rollup.run_once(app.driver, None)
    assert next_from % 60 == 0 and next_from <= time.time()
    (mail,) = [q for q in app.overview() if q.name == "mail"]
    assert mail.finished_last_hour == {"succeeded": 3, "failed": 0, "dead_letter": 1}
    assert len(mail.history) == 60
    busy = [m for m in mail.history if m.succeeded or m.dead_letter]
    assert busy and busy[-1].minute >= int(time.time() // 60) * 60 - 60
    assert all(m.pickup_p50_ms is not None and m.pickup_p50_ms >= 0 for m in busy)
    # A second round rewrites the same minutes: nothing is counted twice.
    rollup.run_once(app.driver, next_from)
    rollup.run_once(app.driver, None)
    (again,) = [q for q in app.overview() if q.name == "mail"]
    assert again.finished_last_hour == mail.finished_last_hour
