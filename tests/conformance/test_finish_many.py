"""Batched outcome writes keep every rule of a single fenced write: a stale claim_version
writes nothing and comes back as LeaseLost, each written job gets its attempt record."""

from __future__ import annotations

import durq
from durq import states
from durq.backends.base import FinishRequest
from durq.errors import LeaseLost


def test_finish_many_is_fenced_and_records_attempts(app: durq.App) -> None:
    for n in range(3):
        app.enqueue("batch.finish", {"n": n})
    backend = app.backend
    with backend.transaction() as ex:
        claimed = backend.job_claim(
            ex, queues=["default"], worker_id="w1", limit=3, lease_seconds=30
        )
    assert len(claimed) == 3
    done, failed, stale = claimed
    reqs = [
        FinishRequest(done.id, done.claim_version, "w1", states.complete({"ok": 1}), 5),
        FinishRequest(failed.id, failed.claim_version, "w1", states.retry(30, "boom", "x"), 7),
        FinishRequest(stale.id, stale.claim_version - 1, "w1", states.complete(), 1),
    ]
    with backend.transaction() as ex:
        results = backend.job_finish_many(ex, reqs)

    assert isinstance(results[0], durq.Finished) and results[0].state == "succeeded"
    assert app.get_job(done.id).result == {"ok": 1}
    assert isinstance(results[1], durq.Finished) and results[1].state == "retry_wait"
    assert results[1].last_error_code == "boom"
    assert isinstance(results[2], LeaseLost)
    assert app.get_job(stale.id).state == "running"  # the stale write changed nothing
    assert [a.outcome for a in app.attempts(done.id)] == ["succeeded"]
    assert [a.runtime_ms for a in app.attempts(failed.id)] == [7]
    assert app.attempts(stale.id) == []
