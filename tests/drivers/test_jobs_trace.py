"""The trace context a job carries from its enqueue span to the spans that run it."""

from __future__ import annotations

from dataclasses import replace

from durq._drivers import Driver

from .helpers import JobFactory, insert

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_job_trace_context_reads_back_what_job_insert_wrote(
    driver: Driver, new_job: JobFactory
) -> None:
    traced = insert(driver, replace(new_job("t"), trace_context=PARENT))
    untraced = insert(driver, new_job("t"))
    with driver.read() as ex:
        assert driver.job_trace_context(ex, [traced.id, untraced.id]) == {traced.id: PARENT}
        assert driver.job_trace_context(ex, [untraced.id]) == {}
        assert driver.job_trace_context(ex, []) == {}


def test_job_trace_context_of_jobs_inserted_many_at_once(
    driver: Driver, new_job: JobFactory
) -> None:
    # Jobs that run now take PostgreSQL's COPY path, delayed ones its multi-row INSERT.
    now = [replace(new_job("t"), trace_context=PARENT), new_job("t")]
    later = [replace(new_job("t", delay=60), trace_context=OTHER), new_job("t", delay=60)]
    with driver.transaction() as ex:
        copied = driver.job_insert_many(ex, now)
        inserted = driver.job_insert_many(ex, later)
    ids = [job.id for job in copied + inserted]
    with driver.read() as ex:
        found = driver.job_trace_context(ex, ids)
    assert found == {copied[0].id: PARENT, inserted[0].id: OTHER}
