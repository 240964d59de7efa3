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
