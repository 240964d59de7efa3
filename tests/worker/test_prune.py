"""Pruning: finished jobs past retention are deleted; their ids answer "gone", ids that
never existed answer "not found"."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import durq
from durq import testing
from durq._maintenance import prune

from .support import run_cli, running_worker, wait_until


def _finished_jobs(app: durq.App) -> dict[str, durq.Job]:
    @app.task
    def fine() -> str:
        return "done"

    @app.task(max_attempts=1)
    def broken() -> None:
        raise durq.Fail("bad_input", "cannot parse")

    succeeded = testing.run_inline(app, fine)
    dead = testing.run_inline(app, broken)
    cancelled = app.cancel(app.enqueue("fine").id)
    waiting = app.enqueue("fine", delay=3600)
    assert (succeeded.state, dead.state, cancelled.state) == (
        "succeeded",
        "dead_letter",
        "cancelled",
    )
    return {"succeeded": succeeded, "dead_letter": dead, "cancelled": cancelled, "queued": waiting}


def test_jobs_past_retention_are_gone_and_unknown_ids_not_found(
    make_app: Callable[..., durq.App], db_url: str
) -> None:
    app = make_app(
        prune_succeeded_seconds=0, prune_cancelled_seconds=0, prune_dead_letter_seconds=3600
    )
    jobs = _finished_jobs(app)

    counts = prune.run_once(app.driver, app.settings)

    assert counts == {"succeeded": 1, "dead_letter": 0, "cancelled": 1}
    for state in ("succeeded", "cancelled"):
        with pytest.raises(durq.JobGone, match="pruned"):
            app.get_job(jobs[state].id)
        with pytest.raises(durq.JobGone):
            app.attempts(jobs[state].id)
    assert app.get_job(jobs["dead_letter"].id).state == "dead_letter"  # within retention
    assert app.get_job(jobs["queued"].id).state == "queued"  # never pruned: not finished
    unknown = jobs["queued"].id + 1000
    with pytest.raises(durq.JobNotFound) as not_found:
        app.get_job(unknown)
    assert not isinstance(not_found.value, durq.JobGone)

    shown = run_cli(db_url, "jobs", "show", str(jobs["succeeded"].id))
    assert shown.returncode == 1 and "pruned" in shown.stderr and "E_GONE" in shown.stderr
    missing = run_cli(db_url, "jobs", "show", str(unknown))
    assert missing.returncode == 1 and "E_NOT_FOUND" in missing.stderr

    assert prune.run_once(app.driver, app.settings) == {
        "succeeded": 0,
        "dead_letter": 0,
        "cancelled": 0,
    }


def test_tombstones_expire_after_their_own_retention(make_app: Callable[..., durq.App]) -> None:
    app = make_app(prune_succeeded_seconds=0)
    job = _finished_jobs(app)["succeeded"]
    prune.run_once(app.driver, app.settings)
    with pytest.raises(durq.JobGone):
        app.get_job(job.id)
    app.settings = app.settings.model_copy(update={"prune_tombstone_seconds": 0})
    prune.run_once(app.driver, app.settings)
    with pytest.raises(durq.JobNotFound) as later:
        app.get_job(job.id)
    assert not isinstance(later.value, durq.JobGone)


def test_the_worker_prunes_as_part_of_its_maintenance(make_app: Callable[..., durq.App]) -> None:
    app = make_app(prune_succeeded_seconds=0)

    @app.task
    def quick() -> int:
        return 1

    with running_worker(app, prune_interval=0.1) as worker:
        job = quick.enqueue()

        def gone() -> bool:
            try:
                app.get_job(job.id)
            except durq.JobGone:
                return True
            return False

        wait_until(gone, what="the worker's maintenance to prune the finished job")
        maintenance = worker.maintenance
        assert maintenance is not None
        wait_until(lambda: maintenance.pruned >= 1, what="the prune round to report its count")
