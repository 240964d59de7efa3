"""``execution_mode=sync``: run a submitted job through durq in a small bounded pool.

The request thread never runs task code itself. It takes a slot (none free: the caller
gets 429 before anything is enqueued), the job runs via ``App.run_job`` in the pool, and
the request waits at most ``timeout`` seconds: a job that finishes in time answers with
its final status, a slower one answers with its status so far and keeps its slot until it
returns, so a stalled task can hold at most ``max_concurrency`` threads, never the server.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import durq

__all__ = ["SyncRunner"]


class SyncRunner:
    def __init__(
        self, queue_app: durq.App, *, max_concurrency: int, timeout: float, worker_id: str
    ) -> None:
        self.queue_app = queue_app
        self.timeout = timeout
        self.worker_id = worker_id
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_concurrency, thread_name_prefix="nexus-sync"
        )

    def acquire(self) -> bool:
        """Take a slot without waiting; False when every slot is busy."""
        return self._slots.acquire(blocking=False)

    def release(self) -> None:
        self._slots.release()

    def run(self, job_id: int) -> durq.Job:
        """Run a job in the pool (the caller holds a slot, given back when the job ends);
        return it as it is once done, or at the deadline."""
        deadline = time.monotonic() + self.timeout
        try:
            future = self._pool.submit(self.queue_app.run_job, job_id, worker_id=self.worker_id)
        except BaseException:
            self.release()
            raise
        future.add_done_callback(lambda _: self.release())
        try:
            job = future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            return self.queue_app.get_job(job_id)
        # a worker may have claimed it first (run_job then returns it as it was): wait on it
        while job.state is durq.JobState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.05)
            job = self.queue_app.get_job(job_id)
        return job

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
