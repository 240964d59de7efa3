"""enqueue_many builds its returned Jobs without reading them back on PostgreSQL (COPY):
they must equal what the database then holds, on both backends."""

from __future__ import annotations

import durq


def test_returned_jobs_equal_the_stored_rows(app: durq.App) -> None:
    @app.task(name="bulk.readback", max_attempts=4)
    def readback(n: int, s: str) -> None:
        return None

    jobs = app.enqueue_many([("bulk.readback", {"n": i, "s": "a\\b\t"}) for i in range(25)])
    assert [j.args["n"] for j in jobs] == list(range(25))
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)
    for job in jobs:
        assert app.get_job(job.id).to_dict() == job.to_dict()


def test_scheduled_jobs_in_a_batch_keep_their_run_at(app: durq.App) -> None:
    jobs = app.enqueue_many(
        [durq.EnqueueRequest("bulk.later", {"n": 1}, delay=60), ("bulk.later", {"n": 2})]
    )
    for job in jobs:
        assert app.get_job(job.id).to_dict() == job.to_dict()
    assert jobs[0].run_at > jobs[1].run_at


def test_return_jobs_false_answers_the_ids_in_request_order(app: durq.App) -> None:
    items = [
        durq.EnqueueRequest("bulk.ids", {"n": i}, delay=60 if i == 3 else None) for i in range(8)
    ]
    ids = app.enqueue_many(items, return_jobs=False)
    assert all(isinstance(job_id, int) for job_id in ids)
    assert [app.get_job(job_id).args["n"] for job_id in ids] == list(range(8))
    # With an idempotency key in the batch (one by one), a repeat answers the original's id.
    keyed = [
        durq.EnqueueRequest("bulk.ids", {"n": 9}, idempotency_key="k"),
        durq.EnqueueRequest("bulk.ids", {}),
    ]
    first = app.enqueue_many(keyed, return_jobs=False)
    again = app.enqueue_many(keyed[:1], return_jobs=False)
    assert again == first[:1]
    assert app.get_job(first[1]).args == {}
    assert app.enqueue_many([], return_jobs=False) == []
