"""The jobs one worker process holds under lease, and a small wake-up primitive.

Everything here is used from the worker's event loop thread only.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field

from ..types import Job

__all__ = ["InFlight", "InFlightJobs", "Phase", "Pulse"]


class Phase(enum.Enum):
    RUNNING = "running"  # the task is executing
    FINISHING = "finishing"  # its outcome waits for the completer's fenced write
    RELEASING = "releasing"  # shutdown ran out of time: a release is being written
    ABANDONED = "abandoned"  # the lease was lost: touch nothing


@dataclass(eq=False)
class InFlight:
    job: Job
    started: float = field(default_factory=time.monotonic)
    phase: Phase = Phase.RUNNING
    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    #: Shutdown asked it to stop: once its code has stopped, it is released.
    stopping: bool = False
    #: Its enqueue span's ``traceparent``, and when its outcome write began (tracing only).
    trace_context: str | None = None
    finishing_ns: int | None = None

    @property
    def runtime_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


class Pulse:
    """Wakes every current waiter each time it fires (an event that resets itself)."""

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None

    def fire(self) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_result(None)
        self._future = None

    async def wait(self, timeout: float | None = None) -> bool:
        """True if fired, False on timeout."""
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._future), timeout)
        except TimeoutError:
            return False
        return True


class InFlightJobs:
    """Jobs this process holds: running, or finished with the outcome not yet written.

    ``concurrency`` bounds how many *run* at once; a finished job's slot frees as soon as
    its outcome is queued, so the next claim overlaps the write. Jobs held in all stay
    under ``2 * concurrency``, so a slow database cannot pile up outcomes without bound.
    ``changed`` fires whenever a slot may have freed (the producer waits on it for
    capacity, shutdown for the last job).
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.changed = Pulse()
        self._jobs: dict[int, InFlight] = {}
        self._running = 0

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, entry: object) -> bool:
        return isinstance(entry, InFlight) and self._jobs.get(entry.job.id) is entry

    @property
    def free(self) -> int:
        return max(0, min(self.concurrency - self._running, 2 * self.concurrency - len(self._jobs)))

    def add(self, job: Job) -> InFlight:
        entry = InFlight(job)
        self._jobs[job.id] = entry
        self._running += 1
        self.changed.fire()
        return entry

    def set_phase(self, entry: InFlight, phase: Phase) -> None:
        if entry.phase is Phase.RUNNING and phase is not Phase.RUNNING and entry in self:
            self._running -= 1
            self.changed.fire()
        entry.phase = phase

    def remove(self, entry: InFlight) -> None:
        if self._jobs.get(entry.job.id) is entry:
            del self._jobs[entry.job.id]
            if entry.phase is Phase.RUNNING:
                self._running -= 1
            self.changed.fire()

    def entries(self) -> list[InFlight]:
        return list(self._jobs.values())

    def running(self) -> list[InFlight]:
        return [e for e in self._jobs.values() if e.phase is Phase.RUNNING]

    def held(self) -> list[tuple[int, int]]:
        """``(job_id, claim_version)`` of every job whose lease this process must keep."""
        return [(e.job.id, e.job.claim_version) for e in self._jobs.values()]
