"""``App``: the task registry and every synchronous operation on jobs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from . import _tracing
from ._drivers import Driver, NewJob, open_driver
from ._engine import jobs, pipeline
from ._engine.enqueue import insert_job, insert_jobs
from ._engine.identity import default_worker_id
from ._engine.schedule import SCOPE as PERIODIC_SCOPE
from ._engine.schedule import PeriodicTask
from ._engine.signing import signer_from_settings
from ._engine.validate import build_new_job, parse_states, validate_queue
from ._maintenance.reclaim import reclaim_batch
from .errors import LeaseLost, SchemaOutOfDate, ValidationError
from .guards import KeyOperations
from .outbox import OutboxOperations
from .registry import TaskRegistry
from .retry import DEFAULT_POLICY
from .settings import Settings, load_settings
from .task import Task
from .types import Artifact, Attempt, Job, RequeueResult, WorkerInfo

__all__ = ["App", "EnqueueRequest"]

F = TypeVar("F", bound=Callable[..., Any])

MAX_LIST_LIMIT = 1000


class EnqueueRequest:
    """One item for :meth:`App.enqueue_many`."""

    __slots__ = ("args", "options", "task")

    def __init__(
        self, task: str | Task[Any, Any], args: dict[str, Any] | None = None, **options: Any
    ):
        self.task = task
        self.args = args
        self.options = options


class App(OutboxOperations, KeyOperations, TaskRegistry):
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
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
            with driver.autocommit() as ex:
                job, created = insert_job(driver, ex, new)
        else:
            with driver.transaction() as ex:
                job, created = insert_job(driver, ex, new)
        if created:
            jobs.announce_committed(driver, [job.queue])
        return job, created

    def enqueue_many(
        self,
        items: Iterable[EnqueueRequest | tuple[str | Task[Any, Any], dict[str, Any]]],
        *,
        connection: Any = None,
    ) -> list[Job]:
        """Enqueue many jobs in one transaction (one statement on PostgreSQL).

        All are validated first; if any is invalid, none is written.
        """
        built = []
        for i, item in enumerate(items):
            req = item if isinstance(item, EnqueueRequest) else EnqueueRequest(item[0], item[1])
            try:
                built.append(self.build(req.task, req.args, **req.options))
            except ValidationError as exc:
                raise ValidationError(f"item {i}: {exc}") from None
        if not built:
            return []
        if not _tracing.active():
            return self._insert_many(built, connection)
        with _tracing.enqueuing(built) as traced:
            inserted = self._insert_many(traced.jobs, connection)
            traced.inserted(inserted)
        return inserted

    def _insert_many(self, built: list[NewJob], connection: Any) -> list[Job]:
        driver = self.driver
        if connection is not None:
            return insert_jobs(driver, driver.foreign_executor(connection), built)
        with driver.transaction() as ex:
            inserted = insert_jobs(driver, ex, built)
        jobs.announce_committed(driver, {job.queue for job in inserted})
        return inserted

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

    def queue_stats(self) -> dict[str, dict[str, Any]]:
        """Per queue: counts by state, oldest and p95 age of ready jobs, and ``degraded``."""
        with self.driver.read() as ex:
            return jobs.queue_stats(
                self.driver,
                ex,
                degraded_p95_age=self.settings.degraded_p95_age_seconds,
                degraded_ready=self.settings.degraded_ready_count,
            )

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

    # ---- running jobs in this process -------------------------------------------------

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
        runtime = pipeline.Runtime(
            self.driver,
            self.tasks,
            self.settings.lease_seconds,
            keyring=self.keyring,
            signer=signer_from_settings(self.settings),
            refresh_timeout=self.settings.refresh_timeout,
        )
        execution = pipeline.run_sync(runtime, job, worker_id, trace_context)
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


def _checked_filters(
    state: str | list[str] | None, created_after: datetime | None, created_before: datetime | None
) -> list[str] | None:
    for name, value in (("created_after", created_after), ("created_before", created_before)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise ValidationError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return parse_states(state)
