"""Tasks and the context a running job sees."""

from __future__ import annotations

import asyncio
import difflib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from ._drivers import Driver
from ._engine import jobs
from ._engine.outage import retry_transient
from ._engine.secrets import Keyring
from ._engine.validate import canonical_json
from .errors import ConfigurationError, InvalidStage, SecretUnavailable, ValidationError
from .retry import Classifier, Fail, RetryPolicy
from .types import Artifact, Job, SealedSecrets

__all__ = ["JobContext", "Task"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


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
    #: Run in a task process of its own, so a crash fails only its attempt (worker.md).
    isolated: bool = False
    is_async: bool = field(init=False)
    _signature: inspect.Signature = field(init=False, repr=False, compare=False)
    _names: frozenset[str] | None = field(init=False, repr=False, compare=False)
    _required: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.fn)
        self._signature = _job_signature(self.fn, self.pass_context, self.name)
        self._names, self._required = _plain_parameters(self._signature)
        if len(set(self.stages)) != len(self.stages):
            raise ConfigurationError(f"task {self.name!r} declares a stage twice: {self.stages}")
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigurationError(f"task {self.name!r}: timeout must be > 0 seconds")

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)  # type: ignore[no-any-return]

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Enqueue with the task's defaults: ``resize.enqueue(image_id=7)``. Arguments are
        checked against the function's signature (and by mypy): a wrong name or a missing
        argument raises ``ValidationError`` and nothing is written."""
        return self.app.enqueue(self, self.bind(args, kwargs))

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``args`` and ``kwargs`` as the job's keyword arguments, checked against the
        task's signature."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ValidationError(
                f"task {self.name!r} cannot take these arguments: "
                f"{self._explain(args, kwargs, exc)}; its signature is {self.name}{self._signature}"
            ) from None
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = self._signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                if value:
                    raise ValidationError(
                        f"task {self.name!r}: a job's arguments are stored by name, so its "
                        f"*{name} cannot be filled; pass them as named arguments"
                    )
            else:
                out[name] = value
        return out

    def _explain(self, args: tuple[Any, ...], kwargs: dict[str, Any], exc: TypeError) -> str:
        """Every unexpected name (with the closest parameter) and every missing one."""
        params = self._signature.parameters
        if args or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return str(exc)
        problems = []
        for name in kwargs:
            if name not in params:
                close = difflib.get_close_matches(name, list(params), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"unexpected keyword argument {name!r}{hint}")
        for name, param in params.items():
            required = param.default is inspect.Parameter.empty and param.kind in (
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.KEYWORD_ONLY,
            )
            if required and name not in kwargs:
                problems.append(f"missing a required argument: {name!r}")
        return "; ".join(problems) or str(exc)

    def parameters(self) -> tuple[dict[str, bool], bool]:
        """The names ``args`` may hold (name → required), and whether it may hold others
        (the function takes ``**kwargs``)."""
        names: dict[str, bool] = {}
        open_ended = False
        for name, param in self._signature.parameters.items():
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                open_ended = True
            elif param.kind in (
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.KEYWORD_ONLY,
            ):
                names[name] = param.default is inspect.Parameter.empty
        return names, open_ended

    def check_args(self, args: dict[str, Any]) -> None:
        """Raise ``ValidationError`` unless ``args`` bind to the task's parameters."""
        # Named parameters only (the usual task): two set checks instead of a bind.
        if self._names is not None and self._required <= args.keys() <= self._names:
            return
        self.bind((), args)

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
        self,
        driver: Driver,
        task: Task[Any, Any],
        job: Job,
        worker_id: str,
        lease_seconds: float,
        *,
        keyring: Keyring | None = None,
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
        self._keyring = keyring
        self._secrets: dict[str, Any] | None = None
        #: The credential_version of the secrets this attempt opened (None: not opened).
        self.credential_version: int | None = None

    @property
    def secrets(self) -> dict[str, Any]:
        """The job's secrets, decrypted here, in memory, on first use ({}: none).

        Secrets that cannot be opened (tampered, another job's, a retired KEK) fail the job
        at once: retrying cannot fix them."""
        if self._secrets is None:
            sealed = self._retrying(self._read_sealed)
            if sealed is None:
                self._secrets = {}
            else:
                try:
                    if self._keyring is None:
                        raise SecretUnavailable(
                            f"job {self.job.id} carries secrets, but this worker has no "
                            "key-encryption keys (DURQ_SECRET_KEKS)"
                        )
                    self._secrets = self._keyring.open(sealed)
                except SecretUnavailable as exc:
                    raise Fail("secret_unavailable", str(exc)) from None
                self.credential_version = sealed.credential_version
        return self._secrets

    @property
    def attempt(self) -> int:
        return self.job.attempt

    def _read_sealed(self) -> SealedSecrets | None:
        with self._driver.read() as ex:
            return self._driver.secret_get(ex, self.job.id)

    def _retrying(self, fn: Callable[[], T]) -> T:
        """A write of the task's own: a database that is away for a moment (SQLite locked
        past its busy timeout, a dropped connection) is waited for, up to the lease, rather
        than failing the task's attempt."""
        return retry_transient(self._driver, fn, timeout=self._lease_seconds)

    def set_stage(self, stage: str) -> None:
        """Advance to the next declared stage (e.g. fetching → processing → uploading)."""
        expected = self.task.next_stage_guard(self.job.id, self.stage, stage)

        def write() -> bool:
            with self._driver.transaction() as ex:
                return jobs.set_stage(
                    self._driver, ex, self.job, stage, expected, self._lease_seconds
                )

        cancel = self._retrying(write)
        self.stage = stage
        self.cancel_requested = self.cancel_requested or cancel

    def heartbeat(self) -> bool:
        """Extend the lease now; returns True if a cancel was requested."""

        def write() -> bool:
            with self._driver.transaction() as ex:
                return jobs.heartbeat(
                    self._driver, ex, self.job.id, self.job.claim_version, self._lease_seconds
                )

        cancel = self._retrying(write)
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


def _job_signature(fn: Callable[..., Any], pass_context: bool, name: str) -> inspect.Signature:
    """The parameters a job's arguments fill: the function's, without the context."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    if pass_context:
        if not params:
            raise ConfigurationError(
                f"task {name!r} has pass_context=True but takes no argument for the context; "
                "give it a first parameter, e.g. def {name}(ctx: durq.JobContext, ...)"
            )
        params = params[1:]
    return signature.replace(parameters=params)


def _plain_parameters(
    signature: inspect.Signature,
) -> tuple[frozenset[str] | None, frozenset[str]]:
    """The parameter names and the required ones, when every parameter can be given by
    name (no ``*args``, ``**kwargs`` or positional-only); else ``(None, ...)``."""
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = signature.parameters.values()
    if any(p.kind not in named for p in params):
        return None, frozenset()
    required = frozenset(p.name for p in params if p.default is inspect.Parameter.empty)
    return frozenset(signature.parameters), required
