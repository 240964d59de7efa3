"""Batched outcome writes keep every rule of a single fenced write: a stale claim_version
writes nothing and comes back as LeaseLost, each written job gets its attempt record (a
success on its job row)."""

from __future__ import annotations

import durq
from durq import states
from durq._drivers.base import FinishRequest
from durq._engine import jobs
from durq.errors import LeaseLost
from durq.testing import run_inline

from ..drivers.helpers import PlainSql


def test_finish_many_is_fenced_and_records_attempts(app: durq.App) -> None:
    for n in range(3):
        app.enqueue("batch.finish", {"n": n})
    backend = app.driver
    with backend.transaction() as ex:
        claimed = backend.job_claim(ex, queue="default", worker_id="w1", limit=3, lease_seconds=30)
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


def test_finish_many_stores_any_error_text_and_unicode_results(app: durq.App) -> None:
    # An error message is whatever a task raised: a NUL or an unpaired surrogate in it must
    # not make the outcome unwritable (the completer would retry the batch forever).
    for n in range(2):
        app.enqueue("batch.text", {"n": n})
    backend = app.driver
    with backend.transaction() as ex:
        failed, done = backend.job_claim(
            ex, queue="default", worker_id="w1", limit=2, lease_seconds=30
        )
    result = {"é": "ü ☃", "n": 1.5, "items": [1, None, True], "nested": {"s": 'q"\\'}}
    reqs = [
        FinishRequest(
            failed.id,
            failed.claim_version,
            "w1",
            states.retry(5, "bad\x00code", "a\x00b\udc80c"),
            1,
        ),
        FinishRequest(done.id, done.claim_version, "w1", states.complete(result), 2),
    ]
    results = backend.finish_batch(reqs)

    assert [type(r) for r in results] == [durq.Finished, durq.Finished]
    assert app.get_job(failed.id).last_error == "a\\x00b\\udc80c"
    assert app.get_job(failed.id).last_error_code == "bad\\x00code"
    assert app.get_job(done.id).result == result
    assert [a.outcome for a in app.attempts(done.id)] == ["succeeded"]
    assert [a.error_message for a in app.attempts(failed.id)] == ["a\\x00b\\udc80c"]


def test_a_result_the_database_cannot_store_fails_the_attempt_with_a_clear_error(
    app: durq.App,
) -> None:
    @app.task(name="batch.nul")
    def nul() -> str:
        return "binary\x00data"

    after = run_inline(app, "batch.nul")
    assert after.state == "dead_letter"
    assert after.last_error_code == "result_not_json"
    assert "NUL" in (after.last_error or "")


def test_an_unanswered_success_is_read_back_as_written(app: durq.App, db_url: str) -> None:
    """The completer's re-read after a commit whose answer was lost: a success, stored on
    its job row only, is found as this holder's write; a claim nobody finished is not."""
    for n in range(2):
        app.enqueue("batch.reread", {"n": n})
    backend = app.driver
    with backend.transaction() as ex:
        done, held = backend.job_claim(
            ex, queue="default", worker_id="w1", limit=2, lease_seconds=30
        )
    req = FinishRequest.for_job(done, "w1", states.complete({"ok": 1}), 5)
    (written,) = backend.finish_batch([req])
    assert isinstance(written, durq.Finished)
    sql = PlainSql(db_url)
    try:
        assert sql.scalar("SELECT count(*) FROM durq_attempts") == 0
    finally:
        sql.close()

    unanswered = FinishRequest.for_job(held, "w1", states.complete(), 5)
    found = jobs.reread_outcomes(backend, [req, unanswered])

    assert found[0] == durq.Finished(done.id, durq.JobState.SUCCEEDED, done.run_at, None, None)
    assert isinstance(found[1], LeaseLost) and found[1].job_id == held.id
