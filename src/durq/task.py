"""Tasks and the context a running job sees."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from ._drivers import Driver
from ._engine import jobs
from ._engine.validate import canonical_json
from .errors import ConfigurationError, InvalidStage, ValidationError
from .retry import Classifier, RetryPolicy
from .types import Artifact, Job

__all__ = ["JobContext", "Task"]

P = ParamSpec("P")
R = TypeVar("R")


class Enqueuer(Protocol):
    """What a task enqueues itself through (``durq.App``)."""

    @property
    def enqueue(self) -> Callable[..., Job]: ...


@dataclass
class Task(Generic[P, R]):
    """A registered function plus its defaults. Call it to run it directly."""

    app: Enqueuer
    name: str
    fn: Callable[..., Any]
    queue: str
    retry: RetryPolicy
    max_attempts: int
    priority: int = 0
    stages: tuple[str, ...] = ()
    timeout: float | None = None
    classifier: Classifier | None = None
    pass_context: bool = False
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.fn)
        if len(set(self.stages)) != len(self.stages):
            raise ConfigurationError(f"task {self.name!r} declares a stage twice: {self.stages}")
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigurationError(f"task {self.name!r}: timeout must be > 0 seconds")

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)  # type: ignore[no-any-return]

    def enqueue(self, **kwargs: Any) -> Job:
        """Enqueue with the task's defaults: ``resize.enqueue(image_id=7)``."""
        return self.app.enqueue(self, kwargs)

    def enqueue_with(
        self,
        args: dict[str, Any] | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay: float | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
        connection: Any = None,
    ) -> Job:
        """Enqueue with options: ``resize.enqueue_with({"image_id": 7}, delay=30)``."""
        return self.app.enqueue(
            self,
            args,
            queue=queue,
            priority=priority,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
            connection=connection,
        )

    async def aenqueue(self, **kwargs: Any) -> Job:
        """``enqueue`` from async code, without blocking the event loop."""
        return await asyncio.to_thread(self.app.enqueue, self, kwargs)

    def next_stage_guard(self, job_id: int, current: str | None, stage: str) -> str | None:
        """The stage the job must be at to move to ``stage`` (None: no stage yet)."""
        if stage not in self.stages:
            raise InvalidStage(
                f"task {self.name!r} has no stage {stage!r}; its stages are {list(self.stages)}"
            )
        index = self.stages.index(stage)
        expected = self.stages[index - 1] if index else None
        if current != expected:
            raise InvalidStage(
                f"job {job_id} is at stage {current!r}; it cannot move to {stage!r}. "
                f"Stages advance in order: {' → '.join(self.stages)}"
            )
        return expected


class JobContext:
    """What a task declared with ``pass_context=True`` receives as its first argument.

    Every write it makes is fenced by the claim; a lost lease raises ``LeaseLost``.
    """

    def __init__(
        self, driver: Driver, task: Task[Any, Any], job: Job, worker_id: str, lease_seconds: float
    ) -> None:
        self.task = task
        self.job = job
        self.worker_id = worker_id
        self.stage: str | None = job.stage
        self.artifacts: list[Artifact] = []
        self.run_report: tuple[int | None, int | None, str | None] | None = None
        self.cancel_requested = False
        self._driver = driver
        self._lease_seconds = lease_seconds

    @property
    def attempt(self) -> int:
        return self.job.attempt

    def set_stage(self, stage: str) -> None:
        """Advance to the next declared stage (e.g. fetching → processing → uploading)."""
        expected = self.task.next_stage_guard(self.job.id, self.stage, stage)
        with self._driver.transaction() as ex:
            cancel = jobs.set_stage(
                self._driver, ex, self.job, stage, expected, self._lease_seconds
            )
        self.stage = stage
        self.cancel_requested = self.cancel_requested or cancel

    def heartbeat(self) -> bool:
        """Extend the lease now; returns True if a cancel was requested."""
        with self._driver.transaction() as ex:
            cancel = jobs.heartbeat(
                self._driver, ex, self.job.id, self.job.claim_version, self._lease_seconds
            )
        self.cancel_requested = self.cancel_requested or cancel
        return self.cancel_requested

    def add_artifact(self, artifact_type: str, payload: Any = None, ref: str | None = None) -> None:
        """Record a typed output, written with the job's success (and only then)."""
        canonical_json(payload, what=f"artifact {artifact_type!r} payload")
        self.artifacts.append(Artifact(artifact_type=artifact_type, payload=payload, ref=ref))

    def report(
        self, *, processed: int | None = None, failed: int | None = None, summary: str | None = None
    ) -> None:
        """The attempt's run log: counts of items processed and failed, and a short summary
        (no secrets). Stored with the attempt record whatever its outcome; the last call wins."""
        for name, value in (("processed", processed), ("failed", failed)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValidationError(f"report {name}= must be an integer >= 0, got {value!r}")
        if summary is not None and not isinstance(summary, str):
            raise ValidationError(f"report summary= must be a string, got {type(summary).__name__}")
        self.run_report = (processed, failed, None if summary is None else summary[:2000])


def call_task(task: Task[Any, Any], ctx: JobContext, args: dict[str, Any]) -> Any | Awaitable[Any]:
    if task.pass_context:
        return task.fn(ctx, **args)
    return task.fn(**args)
