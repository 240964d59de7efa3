"""The jobs one worker process holds under lease, and a small wake-up primitive.

Everything here is used from the worker's event loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..types import Job

__all__ = ["InFlight", "InFlightJobs", "Phase", "Pulse"]

#: A buffer holds at most this many seconds of work at the process's recent start rate.
PREFETCH_HORIZON = 0.05
#: The start rate is measured over windows this long (1/16 s): short, so a burst after an
#: idle stretch opens the buffer within its first window.
RATE_WINDOW = 0.0625


class Phase(enum.Enum):
    BUFFERED = "buffered"  # claimed ahead (prefetch): held under lease, not started yet
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
    """Jobs this process holds: buffered, running, or finished with the outcome not yet
    written.

    ``concurrency`` bounds how many *run* at once; ``prefetch`` more may wait claimed in a
    local buffer (their leases heartbeated like the others), so a job starts the moment a
    slot frees instead of after the next claim's round trip. A finished job's slot frees as
    soon as its outcome is queued, so the next claim overlaps the write. Jobs held in all
    stay under ``2 * concurrency + prefetch``, so a slow database cannot pile up outcomes
    without bound. ``changed`` fires whenever a slot may have freed (the producer waits on
    it for capacity, shutdown for the last job).
    """

    def __init__(self, concurrency: int, prefetch: int = 0) -> None:
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.changed = Pulse()
        self._jobs: dict[int, InFlight] = {}
        self._running = 0
        self._buffer: deque[InFlight] = deque()
        #: Shutdown began: no more claims (``free`` is 0).
        self.closed = False
        #: Jobs started per second, measured over windows of ``RATE_WINDOW``.
        self.start_rate = 0.0
        self._starts = 0
        self._window_start = time.monotonic()

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, entry: object) -> bool:
        return isinstance(entry, InFlight) and self._jobs.get(entry.job.id) is entry

    @property
    def free(self) -> int:
        """How many more jobs a claim may take now: running slots and buffer room."""
        if self.closed:
            return 0
        ahead = self.buffer_size()
        waiting = self._running + len(self._buffer)
        limit = 2 * self.concurrency + ahead
        return max(0, min(self.concurrency + ahead - waiting, limit - len(self._jobs)))

    def buffer_size(self) -> int:
        """How many jobs may wait in the buffer now: ``prefetch`` at most, and no more than
        this process starts in ``PREFETCH_HORIZON`` at its recent rate. Fast jobs get the
        whole buffer; slow ones (under one per ``PREFETCH_HORIZON``) get none, so a worker
        busy with long jobs never sits on ready jobs another worker could start."""
        if not self.prefetch:
            return 0
        now = time.monotonic()
        elapsed = now - self._window_start
        if elapsed >= RATE_WINDOW:
            rate = self._starts / elapsed
            # Half the last window, half before it: one idle window halves the buffer.
            fresh = self.start_rate * PREFETCH_HORIZON < 1  # no buffer yet: nothing to blend
            self.start_rate = rate if fresh else (self.start_rate + rate) / 2
            self._starts, self._window_start = 0, now
        return min(self.prefetch, int(self.start_rate * PREFETCH_HORIZON))

    @property
    def idle_slots(self) -> int:
        """Running slots with nothing in them."""
        return max(0, self.concurrency - self._running)

    def buffer(self, jobs: Iterable[Job]) -> None:
        """Hold claimed ``jobs`` in the local buffer, in claim order (``take`` starts them)."""
        for job in jobs:
            entry = InFlight(job, phase=Phase.BUFFERED)
            self._jobs[job.id] = entry
            self._buffer.append(entry)

    def take(self) -> InFlight | None:
        """The next buffered job, now counted as running; None if the buffer is empty."""
        while self._buffer:
            entry = self._buffer.popleft()
            if entry.phase is Phase.BUFFERED and self._jobs.get(entry.job.id) is entry:
                entry.phase = Phase.RUNNING
                entry.started = time.monotonic()
                self._running += 1
                self._starts += 1
                return entry
        return None

    def close(self) -> None:
        """Shutdown: take no more jobs (the producer's next claim asks for none)."""
        self.closed = True
        self.changed.fire()

    def unbuffer(self) -> list[InFlight]:
        """Every job still waiting in the buffer, taken out of it (still held)."""
        left = [e for e in self._buffer if e.phase is Phase.BUFFERED and e in self]
        self._buffer.clear()
        return left

    def set_phase(self, entry: InFlight, phase: Phase) -> None:
        if entry.phase is Phase.RUNNING and phase is not Phase.RUNNING and entry in self:
            self._running -= 1
            self.changed.fire()
        elif entry.phase is Phase.BUFFERED and entry in self:
            self._discard_buffered(entry)
        entry.phase = phase

    def remove(self, entry: InFlight) -> None:
        if self._jobs.get(entry.job.id) is entry:
            del self._jobs[entry.job.id]
            if entry.phase is Phase.RUNNING:
                self._running -= 1
            elif entry.phase is Phase.BUFFERED:
                self._discard_buffered(entry)
            self.changed.fire()

    def _discard_buffered(self, entry: InFlight) -> None:
        with contextlib.suppress(ValueError):  # taken out already (unbuffer)
            self._buffer.remove(entry)

    def entries(self) -> list[InFlight]:
        return list(self._jobs.values())

    def running(self) -> list[InFlight]:
        return [e for e in self._jobs.values() if e.phase is Phase.RUNNING]

    def buffered(self) -> int:
        return len(self._buffer)

    def held(self) -> list[tuple[int, int]]:
        """``(job_id, claim_version)`` of every job whose lease this process must keep."""
        return [(e.job.id, e.job.claim_version) for e in self._jobs.values()]
