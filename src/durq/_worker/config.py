"""What a worker is configured with: its validated settings, its queues, the App it
serves (as a protocol, so the worker never imports ``durq.app``), its task threads."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import pydantic

from .._drivers import Driver
from .._engine.schedule import PeriodicTask
from .._engine.validate import validate_queue
from ..errors import ConfigurationError, ValidationError
from ..settings import Settings
from ..task import Task
from ..types import Job

__all__ = ["TaskThreads", "WorkerApp", "resolve_queues", "worker_settings"]

T = TypeVar("T")


class WorkerApp(Protocol):
    """What a worker needs from ``durq.App``: its database, tasks and schedules."""

    @property
    def driver(self) -> Driver: ...

    settings: Settings
    tasks: dict[str, Task[Any, Any]]
    periodic_tasks: list[PeriodicTask]

    def enqueue_tick(self, schedule: PeriodicTask, tick: datetime) -> tuple[Job, bool]: ...


def worker_settings(settings: Settings, overrides: dict[str, Any]) -> Settings:
    """``settings`` with ``overrides`` applied and validated like ``DURQ_*`` values
    (so ``poll_interval=0`` becomes 0.1 here too)."""
    values = settings.model_dump() | {k: v for k, v in overrides.items() if v is not None}
    try:
        checked = Settings(**values)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigurationError(f"invalid worker settings: {problems}") from None
    if checked.heartbeat_seconds >= checked.lease_seconds:
        raise ConfigurationError(
            f"heartbeat_seconds ({checked.heartbeat_seconds:g}) must be shorter than "
            f"lease_seconds ({checked.lease_seconds:g}), or leases expire between heartbeats; "
            "e.g. --lease-seconds 30 --heartbeat-seconds 10"
        )
    return checked


def resolve_queues(app: WorkerApp, queues: str | Sequence[str] | None = None) -> list[str]:
    """The queues to work: as given; else ``DURQ_QUEUES`` if set; else every queue the
    App's tasks and periodic schedules use (``default_queue`` if it has none)."""
    if queues is None and "queues" in app.settings.model_fields_set:
        queues = app.settings.queues
    if queues is None:
        names = {t.queue for t in app.tasks.values()}
        names |= {p.queue for p in app.periodic_tasks if p.queue}
        found = sorted(names) or [app.settings.default_queue]
    else:
        items = queues.split(",") if isinstance(queues, str) else list(queues)
        found = list(dict.fromkeys(q.strip() for q in items if q.strip()))
    if not found:
        raise ConfigurationError("no queues to work: give --queues a,b (or DURQ_QUEUES)")
    try:
        return [validate_queue(q) for q in found]
    except ValidationError as exc:
        raise ConfigurationError(str(exc)) from None


class TaskThreads(concurrent.futures.ThreadPoolExecutor):
    """The thread pool for sync tasks; knows how many are running right now."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="durq-task")
        self.busy = 0
        self._busy_lock = threading.Lock()

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        def counted() -> T:
            with self._busy_lock:
                self.busy += 1
            try:
                return fn(*args, **kwargs)
            finally:
                with self._busy_lock:
                    self.busy -= 1

        return super().submit(counted)
