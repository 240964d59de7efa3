"""The transactional outbox and its delivery, in this process, over both backends."""

from __future__ import annotations

import itertools
import random
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._drivers.sqlite.driver import path_from_url
from durq._engine.delivery import DeliveryPolicy, backoff
from durq._worker.delivery_process import DeliveryWorker

from ..waiting import wait_until
from .receiver import Receiver, serving

HOOK = "http://127.0.0.1:9/never-called"


@contextmanager
def delivering(app: durq.App) -> Iterator[DeliveryWorker]:
    worker = DeliveryWorker(app.driver, app.settings, worker_id="test-deliver")
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    wait_until(worker.ready.is_set, what="the delivery worker to start")
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(30)


def raw_connection(url: str) -> object:
    if url.startswith("sqlite"):
        return sqlite3.connect(path_from_url(url))
    return psycopg.connect(conninfo_from_url(url))


def types_of(app: durq.App, job_id: int) -> list[str]:
    return [e.event_type for e in app.list_events(job_id=job_id)]


def test_outbox_rolled_back_change_writes_no_event(
    outbox_app: Callable[..., durq.App], db_url: str
) -> None:
    app = outbox_app()
    # An enqueue in the caller's transaction that rolls back: no job, no event.
    conn = raw_connection(db_url)
    app.enqueue("noop", {}, webhook_url=HOOK, connection=conn)
    conn.rollback()  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]
    assert app.list_jobs() == []
    assert app.list_events() == []

    # A claim whose transaction fails: the job stays queued, and only job.queued exists.
    job = app.enqueue("noop", {}, webhook_url=HOOK)
    with pytest.raises(RuntimeError), app.driver.transaction() as ex:
        claimed = app.driver.job_claim(
            ex, queue="default", worker_id="w", limit=1, lease_seconds=30
        )
        assert [j.id for j in claimed] == [job.id]
        raise RuntimeError("roll the claim back")
    assert app.get_job(job.id).state == "queued"
    assert types_of(app, job.id) == ["job.queued"]

    # Committed changes write one event each, in order, with the documented payloads.
    done = app.run_job(job.id)
    assert done.state == "succeeded"
    events = app.list_events(job_id=job.id)
    assert [e.event_type for e in events] == ["job.queued", "job.running", "job.succeeded"]
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert "result" not in events[1].payload
    assert events[2].payload["result"] == {"n": 0}
    assert len({e.event_id for e in events}) == 3

    # A job without a webhook writes no event at all.
    plain = app.enqueue("noop", {})
    app.run_job(plain.id)
    assert app.list_events(job_id=plain.id) == []


def test_dead_letter_event_carries_normalised_error(outbox_app: Callable[..., durq.App]) -> None:
    app = outbox_app()

    @app.task(name="boom", max_attempts=1)
    def boom() -> None:
        raise durq.Fail("bad_input", "the input was bad")

    job = app.enqueue("boom", {}, webhook_url=HOOK)
    assert app.run_job(job.id).state == "dead_letter"
    last = app.list_events(job_id=job.id)[-1]
    assert last.event_type == "job.dead_letter"
    assert last.payload["error"] == {
        "code": "bad_input",
        "message": "the input was bad",
        "attempt": 1,
    }


def test_full_jitter_backoff_stays_within_its_bounds() -> None:
    policy = DeliveryPolicy(max_attempts=8, base=1.0, cap=10.0)
    rng = random.Random(7)
    for attempt in range(1, 9):
        ceiling = min(10.0, 2.0 ** (attempt - 1))
        samples = [backoff(attempt, policy, rng) for _ in range(200)]
        assert all(0 <= s <= ceiling for s in samples)
        assert max(samples) > ceiling * 0.8  # full jitter spans the whole range


def test_webhook_receiver_fails_then_succeeds_with_backoff(
    outbox_app: Callable[..., durq.App],
) -> None:
    receiver = Receiver(fail_times=2)
    app = outbox_app(webhook_backoff_base=0.2, webhook_backoff_cap=0.4)
    with serving(receiver) as url:
        job = app.enqueue("noop", {"n": 1}, webhook_url=url)
        app.run_job(job.id)
        with delivering(app):
            wait_until(lambda: len(receiver.first) == 3, timeout=30, what="three events")
    events = app.list_events(job_id=job.id)
    assert [e.state for e in events] == ["delivered"] * 3
    assert [e.attempt for e in events] == [3, 3, 3]  # its own counter, not the job's
    assert app.get_job(job.id).attempt == 1
    assert [d["type"] for d in receiver.first] == ["job.queued", "job.running", "job.succeeded"]
    assert receiver.first[2]["data"]["result"] == {"n": 1}
    poll_max, slack = app.settings.webhook_poll_max, 0.5
    for event in events:
        times = receiver.arrivals[event.event_id]
        assert len(times) == 3
        for attempt, (a, b) in enumerate(itertools.pairwise(times), start=1):
            ceiling = min(0.4, 0.2 * 2 ** (attempt - 1))
            assert b - a <= ceiling + poll_max + slack, (attempt, b - a)
    assert receiver.rejected == []
    assert app.job_counters(job.id) == {
        "execution_attempts": 1,
        "refresh_attempts": 0,
        "delivery_attempts": 9,
    }


def test_webhook_always_failing_dead_letters_then_redelivers(
    outbox_app: Callable[..., durq.App],
) -> None:
    receiver = Receiver(always_fail=True)
    app = outbox_app(webhook_max_attempts=3, webhook_backoff_base=0.05)
    with serving(receiver) as url:
        job = app.enqueue("noop", {}, webhook_url=url)
        app.run_job(job.id)
        with delivering(app):
            wait_until(
                lambda: [e.state for e in app.list_events(job_id=job.id)][:1] == ["dead_letter"],
                timeout=30,
                what="the first event in the outbox dead letter",
            )
            first = app.list_events(job_id=job.id)[0]
            assert first.attempt == 3 and receiver.attempts[first.event_id] == 3
            assert first.last_status == 503
            assert first.event_id in {e.event_id for e in app.list_events(state="dead_letter")}
            # Dead-lettered, the next event of the job may go (order: delivered or dead).
            wait_until(
                lambda: all(e.state == "dead_letter" for e in app.list_events(job_id=job.id)),
                timeout=30,
                what="every event dead-lettered",
            )
            receiver.always_fail = False
            again = app.redeliver(first.event_id)
            assert again.state == "pending" and again.attempt == 0
            wait_until(
                lambda: app.get_event(first.event_id).state == "delivered",
                timeout=30,
                what="the redelivered event",
            )
    assert receiver.attempts[first.event_id] == 4
    assert receiver.first[0]["event_id"] == first.event_id
