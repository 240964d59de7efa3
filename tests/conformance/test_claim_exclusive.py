"""Exclusive claim, proven with real OS processes racing on one database."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import pytest

import durq
from durq import states
from durq.backends.base import FinishRequest

JOBS = 2000
PROCESSES = 4


def claimer(url: str, name: str, start: Any, out: Any) -> None:
    """Claim in small batches and complete each job, until no job is left."""
    app = durq.App(url)
    seen: list[tuple[int, int]] = []
    start.wait()
    try:
        while True:
            with app.backend.transaction() as ex:
                jobs = app.backend.job_claim(
                    ex, queues=["default"], worker_id=name, limit=7, lease_seconds=300
                )
            if not jobs:
                break
            for job in jobs:
                seen.append((job.id, job.claim_version))
                req = FinishRequest(job.id, job.claim_version, name, states.complete(name), 0)
                with app.backend.transaction() as ex:
                    app.backend.job_finish(ex, req)
    finally:
        out.put((name, seen))
        app.close()


@pytest.mark.slow
def test_four_processes_claim_each_of_2000_jobs_exactly_once(db_url: str) -> None:
    app = durq.App(db_url)
    app.enqueue_many([("noop", {"n": i}) for i in range(JOBS)])
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=claimer, args=(db_url, f"w{i}", start, out)) for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    start.set()
    results = dict(out.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0

    claims = [job_id for seen in results.values() for job_id, _ in seen]
    assert len(claims) == JOBS and len(set(claims)) == JOBS  # each job once, none twice
    assert sum(1 for seen in results.values() if seen) >= 2, "the processes did not overlap"
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
