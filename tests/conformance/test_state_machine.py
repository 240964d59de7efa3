"""Every transition in TRANSITIONS happens through durq's operations, and no other does.

A hypothesis state machine drives real jobs on the real backend with random operations
(claim, each outcome, cancel, requeue, stale writes) and checks every state change it
observes against the table.
"""

from __future__ import annotations

import itertools
import uuid
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import durq
from durq import states
from durq._drivers.base import FinishRequest
from durq._engine import jobs as engine
from durq.errors import InvalidTransition, LeaseLost
from durq.types import JobState

ALL = list(JobState)


def test_table_is_exactly_the_documented_edges() -> None:
    q, r, w = JobState.QUEUED, JobState.RUNNING, JobState.RETRY_WAIT
    s, d, c = JobState.SUCCEEDED, JobState.DEAD_LETTER, JobState.CANCELLED
    assert set(states.TRANSITIONS) == {
        (q, r),
        (w, r),
        (r, s),
        (r, w),
        (r, d),
        (r, q),
        (r, c),
        (q, c),
        (w, c),
        (q, q),
        (w, q),
        (s, q),
        (d, q),
        (c, q),
    }


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(ALL, ALL)))
def test_every_pair_is_allowed_or_refused_by_the_table(src: JobState, dst: JobState) -> None:
    if (src, dst) in states.TRANSITIONS:
        states.check_transition(src, dst, job_id=7)
    else:
        with pytest.raises(InvalidTransition) as err:
            states.check_transition(src, dst, job_id=7)
        assert (err.value.job_id, err.value.from_state, err.value.to_state) == (7, src, dst)
        assert f"job 7 cannot go from '{src}' to '{dst}'" in str(err.value)


def test_claim_guard_matches_the_partial_index_predicate() -> None:
    # The claim SQL names these states literally so the partial index applies.
    assert states.claim() == {JobState.QUEUED, JobState.RETRY_WAIT}


OUTCOMES = {
    "complete": lambda: states.complete("ok"),
    "retry": lambda: states.retry(0, "E", "retry"),
    "dead_letter": lambda: states.dead_letter("E", "dead"),
    "snooze": lambda: states.snooze(0),
    "release": states.release,
    "cancel": states.cancel_running,
}


class JobLifecycle(RuleBasedStateMachine):
    app: durq.App
    all_observed: ClassVar[set[tuple[JobState, JobState]]] = set()  # across a whole run

    def __init__(self) -> None:
        super().__init__()
        self.queue = f"sm-{uuid.uuid4().hex[:10]}"  # each example sees only its own jobs
        self.known: dict[int, durq.Job] = {}
        self.held: dict[int, durq.Job] = {}  # job id → the claim we hold
        self.stale: list[durq.Job] = []  # claims we lost

    def _record(self, before: durq.Job | None, after: durq.Job) -> None:
        if (before is not None and before.state != after.state) or (
            before is not None and after.claim_version != before.claim_version
        ):
            assert before is not None
            edge = (before.state, after.state)
            assert edge in states.TRANSITIONS, f"observed forbidden {edge}"
            self.all_observed.add(edge)
        self.known[after.id] = after

    @rule()
    def enqueue(self) -> None:
        job = self.app.enqueue("t", {}, max_attempts=3, queue=self.queue)
        self.known[job.id] = job

    @precondition(lambda self: any(j.state in states.claim() for j in self.known.values()))
    @rule()
    def claim(self) -> None:
        with self.app.driver.transaction() as ex:
            got = self.app.driver.job_claim(
                ex, queue=self.queue, worker_id="w", limit=2, lease_seconds=300
            )
        for job in got:
            self._record(self.known.get(job.id), job)
            self.held[job.id] = job

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), outcome=st.sampled_from(sorted(OUTCOMES)))
    def finish(self, data: st.DataObject, outcome: str) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.held)))
        claim = self.held.pop(job_id)
        before = self.app.get_job(job_id)
        req = FinishRequest(job_id, claim.claim_version, "w", OUTCOMES[outcome](), 1)
        with self.app.driver.transaction() as ex:
            after = self.app.driver.job_finish(ex, req)
        assert after is not None, "a write under a lease we hold must go through"
        self._record(before, after)
        self.stale.append(claim)

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.known)))
        before = self.app.get_job(job_id)
        after = self.app.cancel(job_id)
        self._record(before, after)
        if before.state == "running":
            assert after.cancel_requested and after.state == "running"

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.known)))
        before = self.app.get_job(job_id)
        result = self.app.requeue(job_id)
        assert result.idempotent == (before.state == "running")
        if not result.idempotent:
            self.held.pop(job_id, None)
            self.all_observed.add((before.state, JobState.QUEUED))
            assert (before.state, JobState.QUEUED) in states.TRANSITIONS
        self.known[job_id] = result.job

    @precondition(lambda self: bool(self.stale))
    @rule(data=st.data(), outcome=st.sampled_from(sorted(OUTCOMES)))
    def stale_write(self, data: st.DataObject, outcome: str) -> None:
        claim = data.draw(st.sampled_from(self.stale))
        before = self.app.get_job(claim.id)
        if before.state == "running" and before.claim_version == claim.claim_version:
            return  # still ours: not stale
        req = FinishRequest(claim.id, claim.claim_version, "w", OUTCOMES[outcome](), 1)
        with pytest.raises(LeaseLost), self.app.driver.transaction() as ex:
            engine.finish(self.app.driver, ex, req)
        assert self.app.get_job(claim.id) == before

    @invariant()
    def finished_jobs_have_finished_at(self) -> None:
        for job in self.known.values():
            assert (job.finished_at is not None) == job.is_terminal, job


def test_random_operations_only_make_allowed_transitions(app: durq.App) -> None:
    JobLifecycle.app = app
    JobLifecycle.all_observed = set()
    run_state_machine_as_test(
        JobLifecycle,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert JobLifecycle.all_observed, "the random walk made no state change at all"


def test_every_edge_in_the_table_is_reachable_through_operations(app: durq.App) -> None:
    """Deterministically walk each edge with durq's own operations."""
    q, r, w = JobState.QUEUED, JobState.RUNNING, JobState.RETRY_WAIT
    s, d, c = JobState.SUCCEEDED, JobState.DEAD_LETTER, JobState.CANCELLED
    made: set[tuple[JobState, JobState]] = set()

    def claim(job: durq.Job) -> durq.Job:
        with app.driver.transaction() as ex:
            got = app.driver.job_claim_id(ex, job.id, worker_id="w", lease_seconds=300)
        assert got is not None
        made.add((job.state, got.state))
        return got

    def finish(job: durq.Job, change: states.Change) -> durq.Job:
        with app.driver.transaction() as ex:
            after = app.driver.job_finish(
                ex, FinishRequest(job.id, job.claim_version, "w", change, 1)
            )
        assert after is not None
        made.add((job.state, after.state))
        return after

    def op(job: durq.Job, action: str) -> durq.Job:
        after = app.cancel(job.id) if action == "cancel" else app.requeue(job.id).job
        made.add((job.state, after.state))
        return after

    for change, end in [
        (states.complete(1), s),
        (states.retry(0, "E", "m"), w),
        (states.dead_letter("E", "m"), d),
        (states.snooze(0), q),
        (states.release(), q),
        (states.cancel_running(), c),
    ]:
        job = claim(app.enqueue("t", {}, max_attempts=5))
        after = finish(job, change)
        assert after.state == end
        if end == w:
            op(claim(after), "requeue")  # running → requeue is a no-op, not an edge
            running = app.get_job(after.id)
            finish(running, states.retry(0, "E", "m"))
            waiting = app.get_job(after.id)
            op(waiting, "requeue")
            claim(app.get_job(after.id))
            finish(app.get_job(after.id), states.retry(0, "E", "m"))
            op(app.get_job(after.id), "cancel")
        elif end in (s, d, c):
            op(after, "requeue")
    fresh = app.enqueue("t", {})
    op(fresh, "requeue")
    op(app.get_job(fresh.id), "cancel")
    made.discard((r, r))
    assert made == set(states.TRANSITIONS), set(states.TRANSITIONS) ^ made
