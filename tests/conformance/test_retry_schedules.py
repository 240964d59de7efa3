"""The seeds' retry schedules, to the second, through real failing jobs on both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

import durq
from durq import testing
from durq.retry import DEFAULT_POLICY


def _fail_until_done(app: durq.App, task: durq.Task[..., object]) -> tuple[durq.Job, list[float]]:
    """Run the job attempt after attempt and collect the scheduled delay after each
    failure: run_at - that attempt's finish time. ``run_job`` leaves a job scheduled for
    later alone, so once a delay is read the retry is made due at once."""
    job = task.enqueue()
    delays: list[float] = []
    while True:
        job = app.run_job(job.id)
        if job.state != "retry_wait":
            return job, delays
        last = app.attempts(job.id)[-1]
        delays.append((job.run_at - last.finished_at).total_seconds())
        _make_due(app, job.id)


def _make_due(app: durq.App, job_id: int) -> None:
    """Move a waiting job's run_at into the past with plain SQL (no waiting for it)."""
    url = app.database_url
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    when = app.driver.ts_param(datetime.now(UTC) - timedelta(seconds=1))
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE durq_jobs SET run_at = :when WHERE id = :id"),
                {"when": when, "id": job_id},
            )
    finally:
        engine.dispose()


def _always_fails(app: durq.App, **options: object) -> durq.Task[..., object]:
    @app.task(**options)  # type: ignore[call-overload, untyped-decorator]
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


def test_unknown_task_enqueued_by_name_stores_and_applies_the_default_policy(
    make_app: Callable[..., durq.App],
) -> None:
    """A producer that does not import the task stores the default schedule on the job; the
    worker applies that stored schedule, not its own declaration of the task."""
    producer, worker = make_app(), make_app()

    @worker.task(retry=durq.Fixed([7]), max_attempts=2)
    def remote() -> None:
        raise RuntimeError("x")

    job = producer.enqueue("remote", {})
    assert job.retry_policy == DEFAULT_POLICY.to_dict()
    after = worker.run_job(job.id)
    assert (after.state, after.attempt) == ("retry_wait", 1)
    last = worker.attempts(job.id)[-1]
    delay = (after.run_at - last.finished_at).total_seconds()
    # The default's first step (Exponential base 2s, ±10 %), not the worker's Fixed([7]).
    assert isinstance(DEFAULT_POLICY, durq.Exponential)
    nominal, jitter = DEFAULT_POLICY.base, DEFAULT_POLICY.jitter
    assert nominal * (1 - jitter) - 0.002 <= delay <= nominal * (1 + jitter) + 0.002, delay
    assert testing.enqueued_jobs(worker, "remote")[0].id == job.id
