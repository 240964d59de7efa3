"""``App``: the task registry and every synchronous operation on jobs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, TypeVar, overload

from . import _tracing
from ._drivers import Driver, NewJob, open_driver
from ._drivers.sql import Executor
from ._engine import jobs, pipeline
from ._engine.enqueue import insert_job, insert_job_ids, insert_jobs
from ._engine.notices import Notices
from ._engine.schedule import SCOPE as PERIODIC_SCOPE
from ._engine.schedule import PeriodicTask
from ._engine.signing import signer_from_settings
from ._engine.validate import (
    build_new_job,
    checked_args_json,
    validate_queue,
    validate_task_name,
)
from .errors import SchemaOutOfDate, ValidationError
from .guards import KeyOperations
from .inline import InlineRunner
from .insights import InsightOperations
from .jobmetrics import JobMetrics
from .outbox import OutboxOperations
from .reads import JobOperations
from .registry import TaskRegistry
from .retry import DEFAULT_POLICY
from .settings import Settings, load_settings
from .task import Task
from .types import Job

__all__ = ["App", "EnqueueRequest"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class EnqueueRequest:
    """One item for :meth:`App.enqueue_many`."""

    __slots__ = ("args", "options", "task")

    def __init__(
        self, task: str | Task[Any, Any], args: dict[str, Any] | None = None, **options: Any
    ):
        self.task = task
        self.args = args
        self.options = options


def _alike_key(task: object) -> object:
    """Which items of a batch share their validation: by task name, or by Task object."""
    if isinstance(task, str):
        return task
    if isinstance(task, Task):
        return (task.name, id(task))
    return None


class App(
    JobOperations,
    InlineRunner,
    OutboxOperations,
    KeyOperations,
    InsightOperations,
    TaskRegistry,
):
    """A durq application: where jobs live and which tasks this process knows.

    ``App()`` reads ``DURQ_DATABASE_URL`` (default ``sqlite:///durq.db``).
    """

    def __init__(self, database_url: str | None = None, *, settings: Settings | None = None):
        if settings is None:
            settings = load_settings(database_url=database_url) if database_url else load_settings()
        elif database_url is not None:
            settings = load_settings(**(settings.model_dump() | {"database_url": database_url}))
        super().__init__(settings)
        self._driver: Driver | None = None
        self._driver_lock = threading.Lock()
        self._notices: Notices | None = None
        #: The application's own metric names over its jobs (``add_job_metrics``).
        self.job_metrics: list[JobMetrics] = []

    def _enqueuer(self) -> App:
        return self

    # ---- wiring ----------------------------------------------------------------------

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            with self._driver_lock:  # threads racing here must share one pool
                if self._driver is None:
                    s = self.settings
                    self._driver = open_driver(
                        s.database_url,
                        pool_min_size=s.pool_min_size,
                        pool_max_size=s.pool_max_size,
                        sqlite_synchronous=s.sqlite_synchronous,
                        sqlite_busy_timeout_ms=s.sqlite_busy_timeout_ms,
                        pgbouncer=s.pgbouncer,
                    )
        return self._driver

    @property
    def database_url(self) -> str:
        return self.settings.database_url

    def migrate(self) -> list[int]:
        """Apply pending schema migrations; returns the versions applied."""
        return self.driver.migrate()

    def check_schema(self) -> None:
        """Raise ``SchemaOutOfDate`` unless every known migration is applied."""
        missing = sorted(
            set(self.driver.known_migrations()) - set(self.driver.applied_migrations())
        )
        if missing:
            raise SchemaOutOfDate(
                f"migrations {missing} are not applied to this database: run `durq migrate`"
            )

    def close(self) -> None:
        if self._notices is not None:  # the wake-ups owed go out first
            self._notices.close()
            self._notices = None
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_job_metrics(self, metrics: JobMetrics) -> JobMetrics:
        """Export the job figures of ``metrics.tasks`` under the application's own names
        and labels too (``durq serve``'s ``/metrics``, ``durq.api.JobMetricsCollector``)."""
        if not isinstance(metrics, JobMetrics):
            raise ValidationError(f"add_job_metrics() takes a durq.JobMetrics, got {metrics!r}")
        self.job_metrics.append(metrics)
        return metrics

    # ---- enqueue ---------------------------------------------------------------------

    def build(
        self,
        task: str | Task[Any, Any],
        args: dict[str, Any] | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay: float | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
        idempotency_scope: str | None = None,
        idempotency_ttl: float | None = None,
        created_by: str | None = None,
        request_hash: str | None = None,
        webhook_url: str | None = None,
        breaker_key: str | None = None,
        concurrency_key: str | None = None,
        unchecked: bool = False,
    ) -> NewJob:
        """Validate an enqueue request into a ``NewJob`` (pure: nothing is written).

        A task this App defines has its arguments checked against its signature. A task
        name it does not know is refused (with the closest known name) unless
        ``unchecked=True`` says the task lives in another code base, or the App defines no
        task at all (a producer without the code)."""
        if isinstance(task, str):  # a malformed name is that, before it is an unknown one
            validate_task_name(task)
        name, known = self._resolve(task, unchecked=unchecked)
        breaker = self._breaker_rule(breaker_key) if isinstance(breaker_key, str) else None
        limit = self._limit_for(concurrency_key) if isinstance(concurrency_key, str) else None
        new = build_new_job(
            task=name,
            args=args,
            queue=queue
            if queue is not None
            else (known.queue if known else self.settings.default_queue),
            priority=priority if priority is not None else (known.priority if known else 0),
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts
            if max_attempts is not None
            else (known.max_attempts if known else self.settings.default_max_attempts),
            # A task this process does not know gets the default schedule, stored on the
            # job so the worker, its failures and its lost leases all apply the same one.
            retry=known.retry if known else DEFAULT_POLICY,
            created_by=created_by,
            idempotency_key=idempotency_key,
            idempotency_scope=idempotency_scope,
            idempotency_ttl=idempotency_ttl or self.settings.idempotency_ttl_seconds,
            max_args_bytes=self.settings.max_args_bytes,
            max_json_depth=self.settings.max_json_depth,
            request_hash_override=request_hash,
            breaker_key=breaker_key,
            breaker_rule=breaker or self._breaker_rule(""),
            concurrency_key=concurrency_key,
            limit=limit,
        )
        if known is not None:
            known.check_args(args or {})
        return self.with_webhook(new, webhook_url)

    def enqueue(
        self,
        task: str | Task[Any, Any],
        args: dict[str, Any] | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay: float | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
        idempotency_scope: str | None = None,
        idempotency_ttl: float | None = None,
        created_by: str | None = None,
        connection: Any = None,
        webhook_url: str | None = None,
        secrets: dict[str, Any] | None = None,
        refresh_url: str | None = None,
        breaker_key: str | None = None,
        concurrency_key: str | None = None,
        unchecked: bool = False,
    ) -> Job:
        """Enqueue one job and return it.

        With ``webhook_url=`` every state change of the job is delivered there as a signed
        event (written in the same transaction as the change). With ``secrets=`` the
        values are sealed (envelope encryption) and readable only by the running task
        (``ctx.secrets``); ``refresh_url=`` is called when the storage refuses them.

        With ``connection=`` (a SQLAlchemy ``Connection``/``Session`` or a DB-API connection)
        the job is written in the caller's transaction: it exists iff the caller commits.
        With ``idempotency_key=`` the same key and arguments return the original job; the
        same key with other arguments raises ``IdempotencyConflict``. ``breaker_key=``
        names a circuit breaker (``BreakerOpen`` while it is open); ``concurrency_key=`` a
        key limited by ``app.limits``.
        """
        new = self.build(
            task,
            args,
            queue=queue,
            priority=priority,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
            idempotency_scope=idempotency_scope,
            idempotency_ttl=idempotency_ttl,
            created_by=created_by,
            webhook_url=webhook_url,
            breaker_key=breaker_key,
            concurrency_key=concurrency_key,
            unchecked=unchecked,
        )
        if secrets is None and refresh_url is None:
            return self.insert(new, connection=connection)[0]
        values = self.check_secrets(secrets, refresh_url)
        return self.insert(new, connection=connection, secrets=values, refresh_url=refresh_url)[0]

    def insert(
        self,
        new: NewJob,
        *,
        connection: Any = None,
        secrets: dict[str, Any] | None = None,
        refresh_url: str | None = None,
    ) -> tuple[Job, bool]:
        """Write a validated ``NewJob``: ``(job, created)``; its secrets in the same
        transaction; under an enqueue span when tracing is on."""
        if not _tracing.active():
            return self._insert(new, connection, secrets, refresh_url)
        with _tracing.enqueuing([new]) as traced:
            job, created = self._insert(traced.jobs[0], connection, secrets, refresh_url)
            traced.inserted([job])
        return job, created

    def _insert(
        self,
        new: NewJob,
        connection: Any,
        secrets: dict[str, Any] | None,
        refresh_url: str | None,
    ) -> tuple[Job, bool]:
        driver = self.driver
        if secrets is not None:
            if connection is not None:
                ex = driver.foreign_executor(connection)
                job, created = insert_job(driver, ex, new)
                if created:
                    self.store_secrets(ex, job, secrets, refresh_url)
                return job, created
            with driver.transaction() as ex:
                job, created = insert_job(driver, ex, new)
                if created:
                    self.store_secrets(ex, job, secrets, refresh_url)
        elif connection is not None:
            return insert_job(driver, driver.foreign_executor(connection), new)
        elif (
            new.idempotency_key is None and new.breaker_key is None and new.concurrency_key is None
        ):  # a single statement: let it commit by itself
            notices = self._single_notices(driver)
            notify = notices is None or notices.lead(new.queue)
            with driver.autocommit() as ex:
                job, created = insert_job(driver, ex, new, notify=notify)
            if not notify:
                assert notices is not None
                notices.owe(new.queue)  # committed: its wake-up goes out with the window's
        else:
            with driver.transaction() as ex:
                job, created = insert_job(driver, ex, new)
        if created:
            jobs.announce_committed(driver, [job.queue])
        return job, created

    def _single_notices(self, driver: Driver) -> Notices | None:
        """The debounced wake-ups of single enqueues (PostgreSQL's NOTIFY), or None."""
        if not driver.capabilities.listen_notify:
            return None
        if self._notices is None:
            with self._driver_lock:
                if self._notices is None:
                    self._notices = Notices(driver)
        return self._notices

    @overload
    def enqueue_many(
        self,
        items: Iterable[EnqueueRequest | tuple[str | Task[Any, Any], dict[str, Any]]],
        *,
        connection: Any = None,
        return_jobs: Literal[True] = True,
    ) -> list[Job]: ...

    @overload
    def enqueue_many(
        self,
        items: Iterable[EnqueueRequest | tuple[str | Task[Any, Any], dict[str, Any]]],
        *,
        connection: Any = None,
        return_jobs: Literal[False],
    ) -> list[int]: ...

    @overload
    def enqueue_many(
        self,
        items: Iterable[EnqueueRequest | tuple[str | Task[Any, Any], dict[str, Any]]],
        *,
        connection: Any = None,
        return_jobs: bool,
    ) -> list[Job] | list[int]: ...

    def enqueue_many(
        self,
        items: Iterable[EnqueueRequest | tuple[str | Task[Any, Any], dict[str, Any]]],
        *,
        connection: Any = None,
        return_jobs: bool = True,
    ) -> list[Job] | list[int]:
        """Enqueue many jobs in one transaction (one statement on PostgreSQL).

        All are validated first; if any is invalid, none is written. With
        ``return_jobs=False`` only the new jobs' ids come back, in order, which spares
        building a ``Job`` per row (a job an idempotency key matched answers its original's id).
        """
        built = []
        # Items with no options share everything but their args with the first item of
        # their task: that one is validated whole, the others only for their args.
        alike: dict[object, tuple[NewJob, Task[Any, Any] | None]] = {}
        for i, item in enumerate(items):
            req = item if isinstance(item, EnqueueRequest) else EnqueueRequest(item[0], item[1])
            try:
                key = _alike_key(req.task) if not req.options else None
                first = alike.get(key) if key is not None else None
                if first is not None:
                    built.append(self._alike(first, req.args))
                    continue
                new = self.build(req.task, req.args, **req.options)
                if key is not None:
                    alike[key] = (new, self._resolve(req.task)[1])
                built.append(new)
            except ValidationError as exc:
                raise ValidationError(f"item {i}: {exc}") from None
        if not built:
            return []
        if not _tracing.active():
            if not return_jobs:
                return self._insert_many(built, connection, insert_job_ids)
            return self._insert_many(built, connection, insert_jobs)
        with _tracing.enqueuing(built) as traced:
            inserted = self._insert_many(traced.jobs, connection, insert_jobs)
            traced.inserted(inserted)
        return inserted if return_jobs else [job.id for job in inserted]

    def _alike(self, first: tuple[NewJob, Task[Any, Any] | None], args: Any) -> NewJob:
        """``build`` for an item with no options whose task's first item built ``first``:
        only the args differ, and only they are checked (the rules ``build`` applies)."""
        template, known = first
        args_json = checked_args_json(
            args, self.settings.max_args_bytes, self.settings.max_json_depth
        )
        if known is not None:
            known.check_args(args or {})
        return template.with_args(args_json)

    def _insert_many(
        self,
        built: list[NewJob],
        connection: Any,
        insert: Callable[[Driver, Executor, list[NewJob]], list[T]],
    ) -> list[T]:
        """Insert in one transaction (or in the caller's ``connection``) with ``insert``."""
        driver = self.driver
        if connection is not None:
            return insert(driver, driver.foreign_executor(connection), built)
        with driver.transaction() as ex:
            inserted = insert(driver, ex, built)
        jobs.announce_committed(driver, {new.queue for new in built})
        return inserted

    def wake(self, queues: Iterable[str] | None = None) -> bool:
        """Wake idle workers of ``queues`` (None: the default queue and every queue a task of
        this App names) now; True if one was woken.

        Call it after committing a transaction that enqueued with ``connection=``, on
        SQLite: durq cannot see that commit, so workers in other processes would find the
        jobs only at their next poll. (On PostgreSQL the enqueue's NOTIFY is delivered by
        that commit, and this only wakes the workers of this process.)"""
        if queues is None:
            names = {self.settings.default_queue} | {t.queue for t in self.tasks.values()}
        else:
            names = {validate_queue(q) for q in ([queues] if isinstance(queues, str) else queues)}
        return jobs.announce_committed(self.driver, names)

    def enqueue_tick(self, schedule: PeriodicTask, tick: datetime) -> tuple[Job, bool]:
        """Enqueue one tick of a periodic schedule, once however often it is asked."""
        new = self.build(
            schedule.task,
            schedule.args,
            queue=schedule.queue,
            run_at=tick,
            idempotency_key=schedule.key(tick),
            idempotency_scope=PERIODIC_SCOPE,
            idempotency_ttl=schedule.key_ttl,
        )
        return self.insert(new)

    def _runtime(self) -> pipeline.Runtime:
        return pipeline.Runtime(
            self.driver,
            self.tasks,
            self.settings.lease_seconds,
            keyring=self.keyring,
            signer=signer_from_settings(self.settings),
            refresh_timeout=self.settings.refresh_timeout,
            max_result_bytes=self.settings.max_result_bytes,
            max_json_depth=self.settings.max_json_depth,
        )
