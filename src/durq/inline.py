"""``App`` running jobs in the caller's own thread: ``run_job``, ``work`` (behind
``durq.testing``) and reclaiming expired leases, through the same pipeline as a worker."""

from __future__ import annotations

from collections.abc import Sequence

from . import _tracing
from ._drivers import Driver
from ._engine import jobs, pipeline
from ._engine.identity import default_worker_id
from ._maintenance.reclaim import reclaim_batch
from .errors import LeaseLost
from .registry import TaskRegistry
from .types import Job

__all__ = ["InlineRunner"]


class InlineRunner(TaskRegistry):
    @property
    def driver(self) -> Driver:
        raise NotImplementedError

    def get_job(self, job_id: int) -> Job:
        raise NotImplementedError

    def _runtime(self) -> pipeline.Runtime:
        """What running a job needs (the App supplies its keyring and signer)."""
        raise NotImplementedError

    def run_job(self, job_id: int, *, worker_id: str | None = None) -> Job:
        """Claim one ready job by id, run it here, write its outcome; returns the job after.

        A job that is not ready (running elsewhere, finished, scheduled later) is returned
        unchanged.
        """
        wid = worker_id or default_worker_id()
        started = _tracing.now_ns()
        with self.driver.transaction() as ex:
            job = self.driver.job_claim_id(
                ex, int(job_id), worker_id=wid, lease_seconds=self.settings.lease_seconds
            )
            if job is not None and job.concurrency_key is not None:
                self.driver.limit_take(ex, job.concurrency_key)  # its finish frees the slot
            traces = _tracing.claimed(self.driver, ex, [job] if job else [], started, wid)
        if job is None:
            return self.get_job(job_id)
        return self._run_claimed(job, wid, traces.get(job.id))

    def work(
        self,
        *,
        queues: Sequence[str] | None = None,
        limit: int | None = None,
        worker_id: str | None = None,
        batch: int = 10,
    ) -> list[Job]:
        """Claim and run ready jobs in this thread until none is ready (or ``limit`` ran).

        The simple in-process loop behind ``durq.testing``; ``durq worker`` adds
        concurrency, heartbeats and graceful shutdown.
        """
        wid = worker_id or default_worker_id()
        names = (
            list(dict.fromkeys(queues))
            if queues
            else sorted({t.queue for t in self.tasks.values()} or {"default"})
        )
        done: list[Job] = []
        while limit is None or len(done) < limit:
            claimed: list[Job] = []
            started = _tracing.now_ns()
            with self.driver.transaction() as ex:
                for queue in names:
                    take = batch if limit is None else min(batch, limit - len(done))
                    claimed += self.driver.job_claim(
                        ex,
                        queue=queue,
                        worker_id=wid,
                        limit=take - len(claimed),
                        lease_seconds=self.settings.lease_seconds,
                    )
                    if len(claimed) >= take:
                        break
                traces = _tracing.claimed(self.driver, ex, claimed, started, wid)
            if not claimed:
                break
            done.extend(self._run_claimed(job, wid, traces.get(job.id)) for job in claimed)
        return done

    def _run_claimed(self, job: Job, worker_id: str, trace_context: str | None = None) -> Job:
        execution = pipeline.run_sync(self._runtime(), job, worker_id, trace_context)
        req = pipeline.conclude(execution, worker_id)
        if req is None:  # the task's own fenced write found the lease lost
            return self.get_job(job.id)
        started = _tracing.now_ns()
        try:
            with self.driver.transaction() as ex:
                after = jobs.finish(self.driver, ex, req)
        except LeaseLost:
            _tracing.finished(job, trace_context, "lease_lost", started)
            return self.get_job(job.id)
        _tracing.finished(job, trace_context, str(after.state), started)
        return after

    def reclaim_expired(self, limit: int = 100) -> list[Job]:
        """Expired leases → ``retry_wait`` or ``dead_letter`` (the lost attempt is recorded)."""
        return reclaim_batch(self.driver, limit)
