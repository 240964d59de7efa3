"""Exclusive claim, proven with real OS processes racing on one database."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import pytest

import durq
from durq import states
from durq._drivers.base import FinishRequest
from durq._engine import jobs as engine

JOBS = 2000
PROCESSES = 4


def claimer(url: str, name: str, start: Any, out: Any) -> None:
    """Claim in small batches and complete each job, until no job is left."""
    app = durq.App(url)
    with app.driver.read() as ex:
        ex.run("db_now", {"now": 0})
    seen: list[tuple[int, int]] = []
    start.wait(timeout=120)
    first_try = time.time()
    last_claim = 0.0
    try:
        while True:
            with app.driver.transaction() as ex:
                jobs = app.driver.job_claim(
                    ex, queue="default", worker_id=name, limit=7, lease_seconds=300
                )
            if not jobs:
                break
            last_claim = time.time()
            for job in jobs:
                seen.append((job.id, job.claim_version))
                req = FinishRequest(job.id, job.claim_version, name, states.complete(name), 0)
                with app.driver.transaction() as ex:
                    engine.finish(app.driver, ex, req)  # raises LeaseLost if not held
    finally:
        out.put((name, (seen, first_try, last_claim)))
        app.close()


@pytest.mark.slow
def test_four_processes_claim_each_of_2000_jobs_exactly_once(db_url: str) -> None:
    app = durq.App(db_url)
    app.enqueue_many([("noop", {"n": i}) for i in range(JOBS)])
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(PROCESSES + 1), ctx.Queue()  # all start claiming together
    procs = [
        ctx.Process(target=claimer, args=(db_url, f"w{i}", start, out)) for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    start.wait(timeout=120)
    reports = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    results = {name: seen for name, (seen, _, _) in reports.items()}
    # Every process was trying to claim while jobs were still being handed out: a real race
    # (on SQLite one writer may win most turns; the claim must be exclusive regardless).
    last_job_claimed = max(last for _, _, last in reports.values())
    assert all(first < last_job_claimed for _, first, _ in reports.values())

    claims = [job_id for seen in results.values() for job_id, _ in seen]
    assert len(claims) == JOBS and len(set(claims)) == JOBS  # each job once, none twice
    assert all(version == 1 for seen in results.values() for _, version in seen)

    jobs = []
    before = None
    while True:  # page through every job
        page = app.list_jobs(limit=1000, before_id=before)
        if not page:
            break
        jobs.extend(page)
        before = page[-1].id
    assert len(jobs) == JOBS
    assert {j.state for j in jobs} == {durq.JobState.SUCCEEDED}
    assert all(j.attempt == 1 and j.claim_version == 1 for j in jobs)
    owner = {job_id: name for name, seen in results.items() for job_id, _ in seen}
    assert all(j.result == owner[j.id] for j in jobs)  # finished by the process that claimed it
    sample = jobs[:: JOBS // 20]
    assert all(len(app.attempts(j.id)) == 1 for j in sample)
    app.close()
