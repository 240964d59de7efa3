"""The seeds' retry schedules, to the second, through real failing jobs on both backends."""

from __future__ import annotations

from collections.abc import Callable

import durq
from durq import testing


def _fail_until_done(app: durq.App, task: durq.Task[..., object]) -> tuple[durq.Job, list[float]]:
    """Run the job attempt after attempt (``run_job`` runs it now, whatever its run_at) and
    collect the scheduled delay after each failure: run_at - that attempt's finish time."""
    job = task.enqueue()
    delays: list[float] = []
    while True:
        job = app.run_job(job.id)
        if job.state != "retry_wait":
            return job, delays
        last = app.attempts(job.id)[-1]
        delays.append((job.run_at - last.finished_at).total_seconds())


def _always_fails(app: durq.App, **options: object) -> durq.Task[..., object]:
    @app.task(**options)  # type: ignore[call-overload]
    def always_fails() -> None:
        raise RuntimeError("upstream down")

    return always_fails  # type: ignore[no-any-return]


def _close(a: list[float], b: list[float], tol: float = 0.002) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def test_seed_000_fixed_schedule_five_attempts(app: durq.App) -> None:
    task = _always_fails(app, retry=durq.Fixed((60, 300, 900, 3600, 21600)), max_attempts=5)
    job, delays = _fail_until_done(app, task)
    # attempts 1..4 fail and wait delay[attempts-1]; attempt 5 is terminal.
    assert _close(delays, [60, 300, 900, 3600]), delays
    assert (job.state, job.attempt) == ("dead_letter", 5)
    assert [a.attempt for a in app.attempts(job.id)] == [1, 2, 3, 4, 5]


def test_seed_002_backoff_capped_at_last_element(app: durq.App) -> None:
    task = _always_fails(app, retry=durq.Fixed([2, 10, 30]), max_attempts=6)
    job, delays = _fail_until_done(app, task)
    assert _close(delays, [2, 10, 30, 30, 30]), delays
    assert job.state == "dead_letter"


def test_seed_002_max_attempts_one_goes_straight_to_terminal(app: durq.App) -> None:
    task = _always_fails(app, retry=durq.Fixed([2, 10, 30]), max_attempts=1)
    job, delays = _fail_until_done(app, task)
    assert delays == [] and (job.state, job.attempt) == ("dead_letter", 1)


def test_seed_004_exponential_with_jitter_and_cap(app: durq.App) -> None:
    # 1, 2, 4, 8, 16 minutes, ±10 %, never above 30 minutes, 5 retries (6 attempts).
    task = _always_fails(
        app, retry=durq.Exponential(base=60, factor=2, jitter=0.1, cap=1800), max_attempts=6
    )
    job, delays = _fail_until_done(app, task)
    assert len(delays) == 5 and (job.state, job.attempt) == ("dead_letter", 6)
    for delay, minutes in zip(delays, [1, 2, 4, 8, 16], strict=True):
        nominal = minutes * 60
        assert nominal * 0.9 - 0.002 <= delay <= nominal * 1.1 + 0.002, (delay, nominal)
        assert delay <= 1800 + 0.002


def test_retry_policy_applies_to_unknown_task_after_enqueue_by_name(
    make_app: Callable[..., durq.App],
) -> None:
    """A producer that does not import the task stores no schedule; the worker's task wins."""
    producer, worker = make_app(), make_app()

    @worker.task(retry=durq.Fixed([7]), max_attempts=2)
    def remote() -> None:
        raise RuntimeError("x")

    job = producer.enqueue("remote", {})
    assert job.retry_policy == {}
    after = worker.run_job(job.id)
    last = worker.attempts(job.id)[-1]
    assert abs((after.run_at - last.finished_at).total_seconds() - 7) < 0.002
    assert testing.enqueued_jobs(worker, "remote")[0].id == job.id
