"""Periodic tasks are enqueued exactly once per tick, however many workers run."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

import durq
from durq._maintenance import periodic
from durq.errors import ConfigurationError

from .support import WorkerProcess, wait_until

PERIODIC_APP = "tests.worker.periodic_app:app"


@pytest.mark.slow
def test_three_workers_for_three_ticks_enqueue_exactly_three_jobs(
    app: durq.App, spawn: Callable[..., WorkerProcess]
) -> None:
    workers = [spawn("--poll-interval", "0.2", app=PERIODIC_APP, name=f"p{i}") for i in range(3)]
    for worker in workers:
        worker.wait_ready(app)
    # A leader's term starts with the next tick (no back-fill): count three whole ticks
    # after the first one a leader enqueued, however long the election took under load.
    wait_until(
        lambda: app.list_jobs(task="heartbeat_report", limit=1),
        timeout=30,
        what="a leader's first tick",
    )
    first = max(j.run_at for j in app.list_jobs(task="heartbeat_report", limit=1000))
    window = [first + timedelta(seconds=i) for i in (1, 2, 3)]

    def tick_jobs() -> list[durq.Job]:
        found = app.list_jobs(task="heartbeat_report", limit=1000)
        return [j for j in found if window[0] <= j.run_at <= window[-1]]

    try:
        wait_until(
            lambda: (
                {j.run_at for j in tick_jobs()} == set(window)
                and all(app.get_job(j.id).state == "succeeded" for j in tick_jobs())
            ),
            timeout=30,
            what="the three ticks to be enqueued and run",
        )
    except AssertionError as exc:
        seen = sorted((j.run_at.isoformat(), j.state) for j in tick_jobs())
        terms = [line for w in workers for line in w.log().splitlines() if " leads " in line]
        raise AssertionError(f"{exc}; window {window}, seen {seen}, leader terms {terms}") from exc
    assert sorted(j.run_at for j in tick_jobs()) == window  # one job per tick, no more
    assert {j.idempotency_key for j in tick_jobs()} == {
        f"heartbeat_report@{t.isoformat()}" for t in window
    }
    # No tick at all was enqueued twice while they ran.
    everything = app.list_jobs(task="heartbeat_report", limit=1000)
    assert max(Counter(j.run_at for j in everything).values()) == 1
    assert {j.queue for j in everything} == {"ticks"}
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [w.wait_exit() for w in workers] == [0, 0, 0]


def test_run_once_from_many_leaders_enqueues_each_tick_once(
    make_app: Callable[..., durq.App],
) -> None:
    """Even with the leader lease out of the picture (two processes both believing they
    lead), the idempotency key per tick keeps it to one job per tick."""
    apps = [make_app() for _ in range(3)]
    for a in apps:
        a.periodic(cron="*/5 * * * *", args={"report": "daily"}, catch_up=2)(_report)
    now = datetime(2026, 3, 1, 12, 11, 30, tzinfo=UTC)
    created = [periodic.run_once(a.periodic_tasks, a.enqueue_tick, now=now) for a in apps]
    assert [len(c) for c in created] == [2, 0, 0]  # 12:05 and 12:10: the 2 latest ticks
    jobs = apps[0].list_jobs(task="_report")
    assert sorted(j.run_at for j in jobs) == [
        datetime(2026, 3, 1, 12, 5, tzinfo=UTC),
        datetime(2026, 3, 1, 12, 10, tzinfo=UTC),
    ]
    assert {j.args["report"] for j in jobs} == {"daily"}

    later = now + timedelta(minutes=5)
    assert [len(periodic.run_once(a.periodic_tasks, a.enqueue_tick, now=later)) for a in apps] == [
        1,
        0,
        0,
    ]  # 12:15 only


def test_a_new_leader_never_back_fills_and_then_enqueues_each_tick(app: durq.App) -> None:
    app.periodic(cron="* * * * * */2")(_report)  # every 2 s, no catch-up
    start = datetime(2026, 3, 1, 12, 0, 59, 500_000, tzinfo=UTC)
    done: dict[str, datetime] = {}
    # Its first round (a first start, or after any downtime) enqueues no missed tick.
    assert periodic.run_once(app.periodic_tasks, app.enqueue_tick, now=start, done=done) == []
    assert app.list_jobs() == []
    later = start + timedelta(seconds=5)  # then every tick as it comes due
    ticks = periodic.run_once(app.periodic_tasks, app.enqueue_tick, now=later, done=done)
    assert [j.run_at.second for j in sorted(ticks, key=lambda j: j.run_at)] == [0, 2, 4]
    again = periodic.run_once(app.periodic_tasks, app.enqueue_tick, now=later, done=done)
    assert again == []


def test_catch_up_enqueues_only_the_latest_missed_ticks(app: durq.App) -> None:
    app.periodic(cron="* * * * * */2", catch_up=3)(_report)
    now = datetime(2026, 3, 1, 12, 1, 0, 500_000, tzinfo=UTC)
    created = periodic.run_once(app.periodic_tasks, app.enqueue_tick, now=now, done={})
    assert [j.run_at.second for j in sorted(created, key=lambda j: j.run_at)] == [56, 58, 0]


def test_catch_up_must_be_a_small_count(app: durq.App) -> None:
    with pytest.raises(durq.ConfigurationError, match="catch_up must be 0 to"):
        app.periodic(cron="* * * * *", catch_up=-1)(_report)


def test_tick_after_it_was_run_and_pruned_is_not_enqueued_again(app: durq.App) -> None:
    app.periodic(cron="0 * * * *", catch_up=1)(_report)
    now = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    (job,) = periodic.run_once(app.periodic_tasks, app.enqueue_tick, now=now)
    app.settings = app.settings.model_copy(update={"prune_succeeded_seconds": 0})
    app.run_job(job.id)
    from durq._maintenance import prune

    prune.run_once(app.driver, app.settings)
    with pytest.raises(durq.JobGone):
        app.get_job(job.id)
    assert periodic.run_once(app.periodic_tasks, app.enqueue_tick, now=now) == []


def test_invalid_cron_is_refused_with_a_hint(app: durq.App) -> None:
    with pytest.raises(ConfigurationError, match="five fields"):
        app.periodic(cron="every five minutes")(_report)
    app.periodic(cron="* * * * *")(_report)
    with pytest.raises(ConfigurationError, match="registered twice"):
        app.periodic(cron="*/2 * * * *")(app.tasks["_report"])


def _report(report: str = "") -> str:
    return report
