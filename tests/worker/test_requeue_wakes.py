"""A requeue wakes idle workers whoever asks for it: ``App.requeue``, ``durq jobs requeue``
or the HTTP route. Proven by the wake-up source the worker records for the claim, with a
poll interval far longer than the test, so polling cannot explain the pickup."""

from __future__ import annotations

import pytest

import durq

from ..waiting import wait_until
from .support import run_cli, running_worker

LONG_POLL = 300.0


def failing_once_app(db_url: str) -> durq.App:
    app = durq.App(db_url)
    runs: list[int] = []

    @app.task(max_attempts=1)
    def flaky() -> int:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("the upstream answered 500")
        return len(runs)

    return app


def dead_letter_one(app: durq.App, worker: durq.Worker) -> durq.Job:
    job = app.enqueue("flaky")
    wait_until(lambda: app.get_job(job.id).state == "dead_letter", what="the first failure")
    wait_until(lambda: worker.producer.idle.is_set(), what="the worker to be idle")
    return job


def test_app_requeue_wakes_an_idle_worker_of_this_process(db_url: str) -> None:
    app = failing_once_app(db_url)
    with running_worker(app, poll_interval=LONG_POLL, listen_notify=False) as worker:
        job = dead_letter_one(app, worker)
        result = app.requeue(job.id)
        assert result.woke_workers and not result.idempotent
        wait_until(lambda: app.get_job(job.id).state == "succeeded", what="the requeued run")
        assert worker.producer.reason_for(job.id) == "local"
    app.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_durq_jobs_requeue_wakes_an_idle_worker_in_another_process(db_url: str) -> None:
    app = failing_once_app(db_url)
    with running_worker(app, poll_interval=LONG_POLL) as worker:
        wait_until(lambda: worker.notifier.listening.is_set(), what="LISTEN to be in place")
        job = dead_letter_one(app, worker)
        done = run_cli(db_url, "jobs", "requeue", str(job.id))
        assert done.returncode == 0, done.stderr
        wait_until(lambda: app.get_job(job.id).state == "succeeded", what="the requeued run")
        assert worker.producer.reason_for(job.id) == "notify"
    app.close()
