"""The lease protocol checked by a model: Hypothesis drives several simulated workers and a
controllable clock against the real driver, on both backends, and checks after every step:

* at most one worker's outcome is ever accepted per attempt (per ``claim_version``);
* a fenced write (heartbeat, finish) is accepted exactly when the writer holds the current
  claim of a running job; every stale writer is refused;
* every state change anyone makes is in ``states.TRANSITIONS``, under its action;
* ``attempt`` never exceeds ``max_attempts``;
* when every worker has stopped and the clock passed the leases, one reclaim round leaves no
  job ``running``.

The clock: every stored time of the model's jobs is moved back by the step's seconds, which
to the database (PostgreSQL's ``now()`` or SQLite's bound ``:now``) is time passing. Leases
are 60 s, far longer than a run takes, so only the model's clock makes them expire.
What the model does not cover is in docs/reliability.md.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import durq
from durq import states
from durq._drivers import Driver, FinishRequest, open_driver
from durq._engine import jobs as engine_jobs
from durq._engine.policy import next_change
from durq._maintenance import reclaim
from durq.retry import Retry, Snooze
from durq.types import Job, JobState

LEASE = 60.0
JOBS = 3
WORKERS = 3
MAX_ATTEMPTS = 2
#: Bounded so both backends run in well under 30 s.
EXAMPLES, STEPS = 40, 40

#: What the runs explored, summed over both backends (printed by the test with -s).
EXPLORED: Counter[str] = Counter()
STATES_SEEN: set[tuple[str, ...]] = set()


@dataclass
class Held:
    worker: int
    job_id: int
    claim_version: int


class LeaseModel(RuleBasedStateMachine):
    driver: ClassVar[Driver]
    app: ClassVar[durq.App]

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[int] = []
        self.holding: dict[int, dict[int, int]] = {w: {} for w in range(WORKERS)}
        #: (job, claim_version) -> the worker whose outcome was accepted for that attempt.
        self.accepted: dict[tuple[int, int], int] = {}

    # ---- helpers -----------------------------------------------------------------------

    def snapshot(self) -> dict[int, Job]:
        out = {}
        with self.driver.read() as ex:
            for job_id in self.ids:
                job = self.driver.job_get(ex, job_id)
                assert job is not None
                out[job_id] = job
        return out

    def check_changes(
        self, before: dict[int, Job], action: str, job_id: int | None, *, same: bool = False
    ) -> None:
        """Every job that changed state did so by an allowed transition, under ``action``
        for the job acted on (``same``: it changed into the state it was in, as a requeue
        of a queued job does) and ``reclaim`` / nothing for the others."""
        after = self.snapshot()
        for jid, old in before.items():
            new = after[jid]
            assert new.attempt <= new.max_attempts, f"job {jid}: attempt {new.attempt}"
            if old.state == new.state and not (same and jid == job_id):
                continue
            actions = states.TRANSITIONS.get((old.state, new.state))
            assert actions is not None, f"job {jid}: {old.state} -> {new.state} is not allowed"
            acting = action if jid == job_id or action == "reclaim" else None
            assert acting is not None, f"job {jid} changed ({old.state} -> {new.state}) by {action}"
            if new.state == JobState.CANCELLED and old.cancel_requested:
                acting = "cancel"  # a requested cancel wins over the holder's outcome
            assert acting in actions, f"job {jid}: {old.state} -> {new.state} by {acting}"
            EXPLORED[f"{old.state}->{new.state}"] += 1
        STATES_SEEN.add(tuple(str(after[j].state) for j in self.ids))

    def holds_current(self, before: Job, claim_version: int) -> bool:
        return before.state == JobState.RUNNING and before.claim_version == claim_version

    def plain(self, sql: str, **params: Any) -> None:
        """Test-side SQL on the driver's own connection (placeholders as ``:name``)."""
        with self.driver.transaction() as ex:
            conn: Any = getattr(ex, "conn")  # noqa: B009 - a dialect's connection
            if self.driver.dialect == "postgresql":
                sql = re.sub(r":(\w+)", r"%(\1)s", sql)
            conn.execute(sql, params)

    def shift_clock(self, seconds: float) -> None:
        delta = "make_interval(secs => :d)" if self.driver.dialect == "postgresql" else ":d"
        self.plain(
            f"UPDATE durq_jobs SET run_at = run_at - {delta}, "
            f"lease_expires_at = lease_expires_at - {delta}, "
            f"heartbeat_at = heartbeat_at - {delta} WHERE id >= :first",
            d=seconds,
            first=self.ids[0],
        )

    # ---- the model ---------------------------------------------------------------------

    @initialize()
    def enqueue(self) -> None:
        for n in range(JOBS):
            self.ids.append(self.app.enqueue("m", {"n": n}).id)

    @rule(worker=st.integers(0, WORKERS - 1))
    def claim(self, worker: int) -> None:
        before = self.snapshot()
        with self.driver.transaction() as ex:
            got = self.driver.job_claim(
                ex, queue="model", worker_id=f"w{worker}", limit=1, lease_seconds=LEASE
            )
        for job in got:
            if job.id not in before:
                continue  # another example's job: not this model's
            old = before[job.id]
            assert old.state in states.claim()
            assert job.claim_version == old.claim_version + 1
            self.holding[worker][job.id] = job.claim_version
        self.check_changes(before, "claim", got[0].id if got else None)
        EXPLORED["claim"] += 1

    @precondition(lambda self: any(self.holding.values()))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        worker, job_id, version = self._pick(data)
        before = self.snapshot()
        with self.driver.transaction() as ex:
            answer = self.driver.job_heartbeat(ex, job_id, version, LEASE)
        assert (answer is not None) == self.holds_current(before[job_id], version)
        if answer is None:
            self.holding[worker].pop(job_id, None)  # the worker learns it lost the lease
        self.check_changes(before, "heartbeat", job_id)
        EXPLORED["heartbeat"] += 1

    @precondition(lambda self: any(self.holding.values()))
    @rule(data=st.data(), outcome=st.sampled_from(["success", "retry", "snooze", "release"]))
    def finish(self, data: st.DataObject, outcome: str) -> None:
        worker, job_id, version = self._pick(data)
        before = self.snapshot()
        job = before[job_id]
        if outcome == "release":
            change = states.release()
        else:
            result: Any = {
                "success": states.Success({"ok": True}),
                "retry": Retry(code="boom", message="the task failed", after=0),
                "snooze": Snooze(0),
            }[outcome]
            # The change the worker computes from what it was handed at claim time.
            change = next_change(job, result)
        req = FinishRequest(job_id, version, f"w{worker}", change, 1)
        with self.driver.transaction() as ex:
            written = self.driver.job_finish(ex, req)
        current = self.holds_current(job, version)
        assert (written is not None) == current, (
            f"finish by w{worker} at claim {version} on {job.state}/{job.claim_version}: "
            f"{'accepted' if written else 'refused'}"
        )
        self.holding[worker].pop(job_id, None)
        if written is not None:
            key = (job_id, version)
            assert key not in self.accepted, f"attempt {key} accepted twice"
            self.accepted[key] = worker
        self.check_changes(before, change.action, job_id)
        EXPLORED[f"finish:{outcome}"] += 1

    @rule(worker=st.integers(0, WORKERS - 1))
    def crash(self, worker: int) -> None:
        """The worker dies (SIGKILL): it forgets what it held; its leases run out."""
        self.holding[worker].clear()
        EXPLORED["crash"] += 1

    @rule(seconds=st.sampled_from([1.0, 30.0, LEASE + 1]))
    def advance_clock(self, seconds: float) -> None:
        self.shift_clock(seconds)
        EXPLORED["advance_clock"] += 1

    @rule()
    def reclaim_expired(self) -> None:
        before = self.snapshot()
        reclaim.run_once(self.driver)
        self.check_changes(before, "reclaim", None)
        EXPLORED["reclaim"] += 1

    @rule(index=st.integers(0, JOBS - 1))
    def cancel(self, index: int) -> None:
        before = self.snapshot()
        job_id = self.ids[index]
        with self.driver.transaction() as ex:
            engine_jobs.cancel(self.driver, ex, job_id)
        self.check_changes(before, "cancel", job_id)
        EXPLORED["cancel"] += 1

    @rule(index=st.integers(0, JOBS - 1))
    def requeue(self, index: int) -> None:
        before = self.snapshot()
        job_id = self.ids[index]
        with self.driver.transaction() as ex:
            done = engine_jobs.requeue(self.driver, ex, job_id)
        self.check_changes(before, "requeue", job_id, same=not done.idempotent)
        EXPLORED["requeue"] += 1

    def _pick(self, data: st.DataObject) -> tuple[int, int, int]:
        held = sorted((w, j, v) for w, jobs in self.holding.items() for j, v in jobs.items())
        return data.draw(st.sampled_from(held))

    @invariant()
    def attempts_within_bounds(self) -> None:
        if self.ids:
            for job in self.snapshot().values():
                assert 0 <= job.attempt <= job.max_attempts

    def teardown(self) -> None:
        """Every worker stops; once the leases have run out, one reclaim round leaves
        nothing running."""
        if not self.ids:
            return
        self.shift_clock(LEASE + 1)
        before = self.snapshot()
        reclaim.run_once(self.driver)
        self.check_changes(before, "reclaim", None)
        running = [j.id for j in self.snapshot().values() if j.state == JobState.RUNNING]
        assert not running, f"jobs {running} still running after every worker stopped"
        EXPLORED["examples"] += 1
        # The next example starts with an empty queue: it claims only its own jobs.
        self.plain("DELETE FROM durq_jobs WHERE id >= :first", first=self.ids[0])


def test_lease_protocol_model(db_url: str) -> None:
    app = durq.App(db_url)
    app.migrate()
    app.task(name="m", queue="model", retry=durq.Fixed([0]), max_attempts=MAX_ATTEMPTS)(lambda n: n)
    # No fsync per commit on SQLite: the model checks the protocol, not durability.
    driver = open_driver(db_url, pool_min_size=1, pool_max_size=2, sqlite_synchronous="OFF")
    LeaseModel.driver, LeaseModel.app = driver, app
    try:
        run_state_machine_as_test(
            LeaseModel,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        driver.close()
        app.close()
    print(f"\nlease model ({driver.dialect}): {dict(sorted(EXPLORED.items()))}")
    print(f"distinct job-state combinations seen: {len(STATES_SEEN)}")
    assert EXPLORED["examples"] >= EXAMPLES


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    EXPLORED.clear()
    STATES_SEEN.clear()
