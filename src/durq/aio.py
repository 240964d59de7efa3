"""The async twin of :class:`durq.App` for asyncio code.

Every rule lives in the sync implementation; these methods run it on a worker thread so
the event loop never blocks on the database. For enqueue inside your own *async*
SQLAlchemy transaction, use ``await conn.run_sync(lambda c: app.enqueue(..., connection=c))``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .app import App, EnqueueRequest
from .task import Task
from .types import Attempt, Job, RequeueResult

__all__ = ["AsyncApp"]


class AsyncApp:
    def __init__(self, app: App) -> None:
        self.app = app

    async def enqueue(
        self, task: str | Task[Any, Any], args: dict[str, Any] | None = None, **options: Any
    ) -> Job:
        return await asyncio.to_thread(self.app.enqueue, task, args, **options)

    async def enqueue_many(
        self, items: list[EnqueueRequest], *, connection: Any = None, return_jobs: bool = True
    ) -> list[Job] | list[int]:
        """``App.enqueue_many`` in a thread (``return_jobs=False``: ids only)."""
        return await asyncio.to_thread(
            lambda: self.app.enqueue_many(items, connection=connection, return_jobs=return_jobs)
        )

    async def wake(self, queues: list[str] | None = None) -> bool:
        """``App.wake``: after committing jobs enqueued with ``connection=`` (SQLite)."""
        return await asyncio.to_thread(self.app.wake, queues)

    async def get_job(self, job_id: int) -> Job:
        return await asyncio.to_thread(self.app.get_job, job_id)

    async def list_jobs(self, **filters: Any) -> list[Job]:
        return await asyncio.to_thread(lambda: self.app.list_jobs(**filters))

    async def attempts(self, job_id: int) -> list[Attempt]:
        return await asyncio.to_thread(self.app.attempts, job_id)

    async def cancel(self, job_id: int) -> Job:
        return await asyncio.to_thread(self.app.cancel, job_id)

    async def requeue(self, job_id: int) -> RequeueResult:
        return await asyncio.to_thread(self.app.requeue, job_id)

    async def run_job(self, job_id: int) -> Job:
        return await asyncio.to_thread(self.app.run_job, job_id)
