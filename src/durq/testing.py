"""Helpers for testing code that uses durq, against the real database.

::

    from durq import testing

    job = resize.enqueue(image_id=7)
    testing.assert_enqueued(app, "resize", args={"image_id": 7})
    done = testing.drain(app)                 # run everything ready, in this thread
    finished = testing.run_inline(app, "resize", {"image_id": 8})
"""

from __future__ import annotations

from typing import Any

from .app import App
from .task import Task
from .types import Job

__all__ = ["assert_enqueued", "drain", "enqueued_jobs", "refute_enqueued", "run_inline"]


def enqueued_jobs(
    app: App,
    task: str | Task[Any, Any] | None = None,
    *,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
) -> list[Job]:
    """Jobs waiting to run (queued or retry_wait), oldest first, optionally filtered."""
    name = task.name if isinstance(task, Task) else task
    jobs = app.list_jobs(state=["queued", "retry_wait"], task=name, queue=queue, limit=1000)
    if args is not None:
        jobs = [j for j in jobs if _subset(args, j.args)]
    return sorted(jobs, key=lambda j: j.id)


def assert_enqueued(
    app: App,
    task: str | Task[Any, Any],
    *,
    args: dict[str, Any] | None = None,
    queue: str | None = None,
    count: int | None = None,
) -> list[Job]:
    """Fail with a readable message unless a matching job is waiting."""
    found = enqueued_jobs(app, task, queue=queue, args=args)
    name = task.name if isinstance(task, Task) else task
    if not found or (count is not None and len(found) != count):
        waiting = [(j.task, j.args) for j in enqueued_jobs(app)][:10]
        want = f"{count} job(s)" if count is not None else "a job"
        raise AssertionError(
            f"expected {want} of task {name!r} with args ⊇ {args!r} enqueued"
            f"{' on ' + queue if queue else ''}, found {len(found)}; waiting: {waiting}"
        )
    return found


def refute_enqueued(
    app: App, task: str | Task[Any, Any], *, args: dict[str, Any] | None = None
) -> None:
    found = enqueued_jobs(app, task, args=args)
    if found:
        raise AssertionError(f"expected no job of {task!r} with args ⊇ {args!r}, found {found}")


def drain(app: App, *, queues: list[str] | None = None, limit: int | None = None) -> list[Job]:
    """Run every ready job in this thread, including retries that come due, until none is."""
    return app.work(queues=queues, limit=limit)


def run_inline(
    app: App, task: str | Task[Any, Any], args: dict[str, Any] | None = None, **options: Any
) -> Job:
    """Enqueue one job and run it here at once; returns the job after its attempt."""
    job = app.enqueue(task, args, **options)
    return app.run_job(job.id)


def _subset(want: dict[str, Any], have: dict[str, Any]) -> bool:
    return all(k in have and have[k] == v for k, v in want.items())
