"""``App``'s reads and operator actions on jobs, queues and workers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ._drivers import Driver
from ._engine import jobs
from ._engine.validate import parse_states, validate_queue
from .errors import ValidationError
from .registry import TaskRegistry
from .types import Artifact, Attempt, Job, RequeueResult, WorkerInfo

__all__ = ["MAX_LIST_LIMIT", "JobOperations"]

MAX_LIST_LIMIT = 1000


class JobOperations(TaskRegistry):
    @property
    def driver(self) -> Driver:
        raise NotImplementedError

    # ---- reads -----------------------------------------------------------------------

    def get_job(self, job_id: int) -> Job:
        """The job, or ``JobNotFound`` (``JobGone`` if it was pruned)."""
        with self.driver.read() as ex:
            return jobs.get(self.driver, ex, int(job_id))

    def list_jobs(
        self,
        *,
        state: str | list[str] | None = None,
        queue: str | None = None,
        task: str | None = None,
        created_by: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """Newest first. Page with ``before_id`` = the last id of the previous page."""
        states_ = _checked_filters(state, created_after, created_before)
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_LIST_LIMIT
        ):
            raise ValidationError(
                f"limit must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}"
            )
        with self.driver.read() as ex:
            return self.driver.job_list(
                ex,
                states_=states_,
                queue=queue,
                task=task,
                created_by=created_by,
                created_after=created_after,
                created_before=created_before,
                before_id=before_id,
                limit=limit,
            )

    def count_jobs(
        self,
        *,
        state: str | list[str] | None = None,
        queue: str | None = None,
        task: str | None = None,
        created_by: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> int:
        """How many jobs match the filters of :meth:`list_jobs` (all pages together)."""
        states_ = _checked_filters(state, created_after, created_before)
        with self.driver.read() as ex:
            return self.driver.job_count(
                ex,
                states_=states_,
                queue=queue,
                task=task,
                created_by=created_by,
                created_after=created_after,
                created_before=created_before,
            )

    def attempts(self, job_id: int) -> list[Attempt]:
        with self.driver.read() as ex:
            jobs.get(self.driver, ex, job_id)
            return self.driver.attempt_list(ex, job_id)

    def artifacts(self, job_id: int) -> list[Artifact]:
        with self.driver.read() as ex:
            jobs.get(self.driver, ex, job_id)
            return self.driver.artifact_list(ex, job_id)

    def queue_stats(self, *, created_by: str | None = None) -> dict[str, dict[str, Any]]:
        """Per queue: counts by state, oldest and p95 age of ready jobs, and ``degraded``.

        With ``created_by``, only that owner's jobs are counted (and only the queues it
        has jobs in are listed); the ages, which are every owner's, are then ``None``."""
        with self.driver.read() as ex:
            stats = jobs.queue_stats(
                self.driver,
                ex,
                degraded_p95_age=self.settings.degraded_p95_age_seconds,
                degraded_ready=self.settings.degraded_ready_count,
            )
            if created_by is None:
                return stats
            return jobs.owner_queue_stats(self.driver, ex, created_by, stats)

    # ---- operator actions ------------------------------------------------------------

    def cancel(self, job_id: int) -> Job:
        """queued/retry_wait → cancelled; running → cancel requested (honoured at the
        worker's next fenced write); finished → unchanged."""
        with self.driver.transaction() as ex:
            return jobs.cancel(self.driver, ex, int(job_id))

    def requeue(self, job_id: int) -> RequeueResult:
        """A running job is left alone (an idempotent no-op); any other state → queued with
        attempts, error and finished time reset, and idle workers woken: in other processes
        by a notification where the database has them, in this one directly."""
        driver = self.driver
        with driver.transaction() as ex:
            done = jobs.requeue(driver, ex, int(job_id))
        woke = False
        if not done.idempotent:
            woke = jobs.announce_committed(driver, [done.job.queue]) or done.notified
        return RequeueResult(job=done.job, idempotent=done.idempotent, woke_workers=woke)

    def pause_queue(self, queue: str) -> None:
        with self.driver.transaction() as ex:
            self.driver.queue_set_paused(ex, validate_queue(queue), True)

    def resume_queue(self, queue: str) -> None:
        with self.driver.transaction() as ex:
            self.driver.queue_set_paused(ex, validate_queue(queue), False)

    def list_workers(self, *, include_stopped: bool = True, limit: int = 200) -> list[WorkerInfo]:
        """Worker processes, newest first: live ones, and (``include_stopped``) those that
        stopped cleanly or went silent (``WorkerInfo.status``: alive, stopped, dead)."""
        with self.driver.read() as ex:
            return self.driver.worker_list(ex, include_stopped=include_stopped, limit=limit)


def _checked_filters(
    state: str | list[str] | None, created_after: datetime | None, created_before: datetime | None
) -> list[str] | None:
    for name, value in (("created_after", created_after), ("created_before", created_before)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise ValidationError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return parse_states(state)
