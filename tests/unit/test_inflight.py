"""The worker's prefetch buffer: how much a claim may take, and how the buffer is sized
to the rate jobs start at (pure bookkeeping; the worker-level behaviour is in
tests/worker/test_prefetch.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from durq._worker import inflight
from durq._worker.inflight import InFlightJobs, Phase
from durq.types import Job, JobState

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _jobs(first: int, count: int) -> list[Job]:
    return [
        Job(i, "default", "t", {}, JobState.RUNNING, None, 0, 1, 3, 1, "w", NOW, NOW, NOW)
        for i in range(first, first + count)
    ]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(inflight, "time", fake)
    return fake


def _start(held: InFlightJobs, first: int, count: int) -> None:
    """Claim ``count`` jobs, start them all, and let each finish (its slot frees)."""
    held.buffer(_jobs(first, count))
    while (entry := held.take()) is not None:
        held.set_phase(entry, Phase.FINISHING)
        held.remove(entry)


def test_without_a_start_rate_a_claim_takes_only_free_slots(clock: Clock) -> None:
    held = InFlightJobs(concurrency=10, prefetch=100)
    assert held.buffer_size() == 0
    assert held.free == 10


def _per_window(rate: float) -> int:
    """How many starts in one rate window make ``rate`` starts a second."""
    return round(rate * inflight.RATE_WINDOW)


def test_fast_starts_open_the_buffer_up_to_prefetch(clock: Clock) -> None:
    held = InFlightJobs(concurrency=10, prefetch=100)
    _start(held, 1, _per_window(4000))  # 4,000 starts a second
    clock.now += inflight.RATE_WINDOW
    # 50 ms of work at 4,000/s is 200 jobs; the buffer stops at prefetch.
    assert held.buffer_size() == 100
    assert held.free == 110


def test_the_first_busy_window_after_an_idle_stretch_opens_the_buffer(clock: Clock) -> None:
    held = InFlightJobs(concurrency=10, prefetch=1000)
    _start(held, 1, 1)
    clock.now += 30  # idle for half a minute after one job
    assert held.buffer_size() == 0
    _start(held, 2, _per_window(4000))  # then a burst: its first window counts alone
    clock.now += inflight.RATE_WINDOW
    assert held.buffer_size() == 200


def test_slow_starts_keep_the_buffer_empty(clock: Clock) -> None:
    held = InFlightJobs(concurrency=10, prefetch=100)
    _start(held, 1, 3)  # 3 starts in a second: under one job per 50 ms
    clock.now += 1.0
    assert held.buffer_size() == 0
    assert held.free == 10


def test_an_idle_window_halves_the_buffer(clock: Clock) -> None:
    held = InFlightJobs(concurrency=10, prefetch=1000)
    _start(held, 1, _per_window(4000))
    clock.now += inflight.RATE_WINDOW
    assert held.buffer_size() == 200  # 4,000/s for 50 ms
    clock.now += inflight.RATE_WINDOW  # nothing started in this window
    assert held.buffer_size() == 100


def test_buffered_jobs_wait_then_start_in_claim_order(clock: Clock) -> None:
    held = InFlightJobs(concurrency=2, prefetch=0)
    held.buffer(_jobs(1, 3))
    assert [e.phase for e in held.entries()] == [Phase.BUFFERED] * 3
    assert held.idle_slots == 2 and held.buffered() == 3
    started = [held.take(), held.take()]
    assert [e.job.id for e in started if e] == [1, 2]
    assert held.idle_slots == 0 and held.buffered() == 1
    assert sorted(job_id for job_id, _ in held.held()) == [1, 2, 3]  # all kept under lease


def test_unbuffer_hands_back_what_never_started(clock: Clock) -> None:
    held = InFlightJobs(concurrency=1, prefetch=5)
    held.buffer(_jobs(1, 3))
    running = held.take()
    assert running is not None and running.job.id == 1
    left = held.unbuffer()
    assert [e.job.id for e in left] == [2, 3]
    assert held.take() is None
    assert len(held) == 3  # still held until their releases are written


def test_a_buffered_job_that_leaves_is_never_started(clock: Clock) -> None:
    held = InFlightJobs(concurrency=1, prefetch=5)
    held.buffer(_jobs(1, 2))
    first = held.entries()[0]
    held.set_phase(first, Phase.ABANDONED)
    held.remove(first)
    taken = held.take()
    assert taken is not None and taken.job.id == 2
    assert held.take() is None


def test_held_jobs_stay_bounded_while_outcomes_wait(clock: Clock) -> None:
    held = InFlightJobs(concurrency=2, prefetch=0)
    held.buffer(_jobs(1, 2))
    for _ in range(2):
        entry = held.take()
        assert entry is not None
        held.set_phase(entry, Phase.FINISHING)  # outcome queued, not yet written
    assert held.free == 2  # the next claim overlaps the writes
    held.buffer(_jobs(3, 2))
    for _ in range(2):
        entry = held.take()
        assert entry is not None
        held.set_phase(entry, Phase.FINISHING)
    assert held.free == 0  # 2 * concurrency held: wait for the writes
