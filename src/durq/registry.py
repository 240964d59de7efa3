"""The task registry an ``App`` is built on: ``@app.task`` and ``@app.periodic``."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, overload

from ._engine.schedule import PeriodicTask
from ._engine.validate import validate_queue
from .errors import ConfigurationError, UnknownTask, ValidationError
from .retry import DEFAULT_POLICY, Classifier, RetryPolicy
from .settings import Settings
from .task import Enqueuer, JobContext, Task

__all__ = ["TaskRegistry"]

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


class TaskRegistry:
    """The tasks and periodic schedules this process knows, with their defaults."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.periodic_tasks: list[PeriodicTask] = []

    def _enqueuer(self) -> Enqueuer:
        """What registered tasks enqueue themselves through (the ``App``)."""
        raise NotImplementedError

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        stages: Sequence[str] = (),
        timeout: float | None = None,
        classifier: Classifier | None = None,
        pass_context: Literal[False] = False,
        isolated: bool = False,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        stages: Sequence[str] = (),
        timeout: float | None = None,
        classifier: Classifier | None = None,
        pass_context: Literal[True],
        isolated: bool = False,
    ) -> Callable[[Callable[Concatenate[JobContext, P], R]], Task[P, R]]: ...

    def task(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        stages: Sequence[str] = (),
        timeout: float | None = None,
        classifier: Classifier | None = None,
        pass_context: bool = False,
        isolated: bool = False,
    ) -> Task[Any, Any] | Callable[[F], Task[Any, Any]]:
        """Register a task, e.g. ``@app.task(queue="images", retry=Fixed([60]))``.

        The task is typed by its function: ``resize.enqueue(image_id=7)`` is checked by
        mypy, and at run time against the signature. With ``pass_context=True`` the first
        parameter receives the :class:`JobContext` and is not a job argument. With
        ``isolated=True`` a worker runs it in a task process of its own: a crash (an exit, a
        segfault, a kill) fails only that attempt, recorded as ``crashed``."""

        def register(func: F) -> Task[Any, Any]:
            task_name = name or func.__name__
            if task_name in self.tasks:
                raise ConfigurationError(
                    f"task {task_name!r} is registered twice; give one of them name=..."
                )
            attempts = (
                max_attempts if max_attempts is not None else self.settings.default_max_attempts
            )
            if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
                raise ConfigurationError(f"task {task_name!r}: max_attempts must be an int >= 1")
            task_queue = validate_queue(queue or self.settings.default_queue)
            task: Task[Any, Any] = Task(
                app=self._enqueuer(),
                name=task_name,
                fn=func,
                queue=task_queue,
                retry=retry or DEFAULT_POLICY,
                max_attempts=attempts,
                priority=priority,
                stages=tuple(stages),
                timeout=timeout,
                classifier=classifier,
                pass_context=pass_context,
                isolated=isolated,
            )
            self.tasks[task_name] = task
            return task

        return register(fn) if fn is not None else register

    def periodic(
        self,
        cron: str,
        *,
        name: str | None = None,
        args: dict[str, Any] | None = None,
        queue: str | None = None,
        catch_up: int = 0,
        **task_options: Any,
    ) -> Callable[[F | Task[Any, Any]], Task[Any, Any]]:
        """Enqueue a task at every tick of ``cron`` (UTC), exactly once per tick however many
        workers run: ``@app.periodic(cron="*/5 * * * *")``.

        Decorates a function (registered as a task with ``task_options``) or an existing
        ``Task``. Six fields put seconds last (``"* * * * * */10"``). Nothing is back-filled:
        when a leader starts (first start, after downtime, after a leader change) the
        schedule resumes with its next tick, after enqueuing its ``catch_up`` latest missed
        ticks (none by default; ``catch_up=1`` keeps a tick that fell due during a deploy).
        """

        def register(target: F | Task[Any, Any]) -> Task[Any, Any]:
            if isinstance(target, Task) and task_options:
                raise ConfigurationError(
                    f"periodic({cron!r}) got task options {sorted(task_options)} for the "
                    f"existing task {target.name!r}; give them to @app.task instead"
                )
            task_name = (
                target.name
                if isinstance(target, Task)
                else task_options.get("name") or target.__name__
            )
            schedule = PeriodicTask(  # validates the cron before anything is registered
                name=name or task_name,
                task=task_name,
                cron=cron,
                args=dict(args or {}),
                queue=validate_queue(queue) if queue else None,
                catch_up=catch_up,
            )
            if any(p.name == schedule.name for p in self.periodic_tasks):
                raise ConfigurationError(
                    f"periodic schedule {schedule.name!r} is registered twice; give one of "
                    "them name=..."
                )
            task = target if isinstance(target, Task) else self.task(target, **task_options)
            self.periodic_tasks.append(schedule)
            return task

        return register

    def _resolve(
        self, task: str | Task[Any, Any], *, unchecked: bool = False
    ) -> tuple[str, Task[Any, Any] | None]:
        if isinstance(task, Task):
            return task.name, task
        if not isinstance(task, str):
            raise ValidationError(f"task must be a task name or a Task, got {type(task).__name__}")
        known = self.tasks.get(task)
        if known is None and self.tasks and not unchecked:
            close = difflib.get_close_matches(task, list(self.tasks), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UnknownTask(
                f"no task named {task!r} is defined in this App ({hint}it defines "
                f"{sorted(self.tasks)[:20]}). If the task lives in another code base, enqueue "
                "it with unchecked=True (durq enqueue: leave out --app; HTTP: serve an App "
                "that defines it)"
            )
        return task, known
