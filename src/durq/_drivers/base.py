"""The driver core: connections, transactions, values across the wire, migrations.

A driver is River's ``riverdriver`` in Python: it knows how to reach one kind of database
and how to run durq's named SQL blocks there; it makes no policy decision. The typed
query methods live beside this (:mod:`.jobs`, :mod:`.runtime`, :mod:`.api`), one per
named block; the rules that use them live in ``durq._engine``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .. import states
from ..errors import DatabaseUnavailable, LeaseLost
from ..keys import Breaker, Limit
from ..types import Artifact, Finished, Job
from .sql import Executor, Queries, SqlAlchemyExecutor, load_queries, migrations_in

__all__ = ["Capabilities", "DriverCore", "FinishRequest", "Listener", "LoopConnection", "NewJob"]

T = TypeVar("T")

#: Named blocks whose SQL is the same in every dialect.
SHARED_SQL = Path(__file__).parent / "shared"


class Listener(Protocol):
    """A connection that receives job notifications (``capabilities.listen_notify``)."""

    def notifications(self, timeout: float) -> Iterator[str]:
        """The queue names notified within ``timeout`` seconds."""
        ...

    def close(self) -> None: ...


class LoopConnection(Protocol):
    """A connection of its own whose statements are awaited on an asyncio event loop
    (``capabilities.loop_connections``): the worker's claims and plain outcome writes,
    each one statement that commits by itself."""

    async def job_claim(
        self, *, queue: str, worker_id: str, limit: int, lease_seconds: float
    ) -> list[Job]:
        """What the driver's ``job_claim`` claims, in the same order."""
        ...

    async def job_finish_many(self, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
        """What the driver's ``job_finish_many`` writes, for requests without artifacts."""
        ...

    async def breaker_read_many(self, keys: Sequence[str]) -> dict[str, Breaker]:
        """What the driver's ``breaker_read_many`` reads (unlocked)."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Capabilities:
    """What the database offers beyond plain SQL; the code reads these, never the class."""

    #: LISTEN/NOTIFY wake-ups across processes, sent inside the transaction.
    listen_notify: bool
    #: Wake-ups across processes sent after commit (``wake_listeners``), where the
    #: database has no notifications of its own (SQLite's socket channel).
    wake_after_commit: bool = False
    #: ``write_together`` shares one commit among concurrent writers (one writer at a
    #: time, each commit waiting for the disk: SQLite).
    group_commit: bool = False
    #: ``loop_connection`` gives a connection awaited on an event loop: a worker's claims
    #: and outcome writes are sent at once and their round trips overlap the jobs it runs.
    loop_connections: bool = False


@dataclass(frozen=True, slots=True)
class NewJob:
    """A validated enqueue request, ready to insert."""

    queue: str
    task: str
    args_json: str
    priority: int
    run_at: datetime | None
    delay: float
    max_attempts: int
    retry_policy_json: str
    created_by: str | None
    idempotency_scope: str | None
    idempotency_key: str | None
    request_hash: str
    idempotency_ttl: float
    breaker_key: str | None = None
    breaker_threshold: int = 5
    breaker_pause: float = 1800.0
    concurrency_key: str | None = None
    limit: Limit | None = None
    #: The W3C ``traceparent`` of the span that enqueued the job (tracing only).
    trace_context: str | None = None
    #: Where the job's state changes are delivered (the outbox); None: no events.
    webhook_url: str | None = None

    def with_args(self, args_json: str) -> NewJob:
        """This request with other arguments (a batch's items of one task). Positional:
        ``dataclasses.replace`` cost more than the rest of the item's validation."""
        return NewJob(
            self.queue,
            self.task,
            args_json,
            self.priority,
            self.run_at,
            self.delay,
            self.max_attempts,
            self.retry_policy_json,
            self.created_by,
            self.idempotency_scope,
            self.idempotency_key,
            self.request_hash,
            self.idempotency_ttl,
            self.breaker_key,
            self.breaker_threshold,
            self.breaker_pause,
            self.concurrency_key,
            self.limit,
            self.trace_context,
            self.webhook_url,
        )


@dataclass(frozen=True, slots=True)
class FinishRequest:
    """One fenced outcome write for a job this worker holds at ``claim_version``."""

    job_id: int
    claim_version: int
    worker_id: str | None
    change: states.Change
    runtime_ms: int | None
    artifacts: Sequence[Artifact] = ()
    #: The job's keys (copied from the claimed job): the finish counts a breaker failure
    #: or frees a concurrency slot only for jobs that name one.
    breaker_key: str | None = None
    concurrency_key: str | None = None
    #: The task's run log (processed, failed, summary), stored with the attempt record.
    report: tuple[int | None, int | None, str | None] | None = None
    task: str = ""
    #: The formatted traceback of a failed attempt, stored with its attempt record.
    traceback: str | None = None

    @classmethod
    def for_job(
        cls,
        job: Job,
        worker_id: str | None,
        change: states.Change,
        runtime_ms: int | None,
        artifacts: Sequence[Artifact] = (),
        report: tuple[int | None, int | None, str | None] | None = None,
        traceback: str | None = None,
    ) -> FinishRequest:
        """The write for a claimed ``job``, carrying its keys."""
        return cls(
            job.id,
            job.claim_version,
            worker_id,
            change,
            runtime_ms,
            artifacts,
            job.breaker_key,
            job.concurrency_key,
            report,
            job.task,
            traceback,
        )


class DriverCore(ABC):
    dialect: str
    capabilities: Capabilities
    queries: Queries
    folder: Path

    def __init__(self, url: str) -> None:
        self.url = url
        self.queries = load_queries(self.folder, SHARED_SQL)

    # ---- connections -----------------------------------------------------------------

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Executor]:
        """A write transaction on a connection durq owns; commits on success."""

    @abstractmethod
    def read(self) -> AbstractContextManager[Executor]:
        """A connection for reads."""

    def write_together(self, fn: Callable[[Executor], T]) -> T:
        """``fn`` in a write transaction, which the dialect may share with other threads'
        concurrent ``write_together`` calls (``capabilities.group_commit``); ``fn``'s
        writes are undone alone if it raises."""
        with self.transaction() as ex:
            return fn(ex)

    def autocommit(self) -> AbstractContextManager[Executor]:
        """A connection on which each statement commits by itself, for single-statement
        writes; dialects where that saves nothing use a transaction."""
        return self.transaction()

    @abstractmethod
    def foreign(self, connection: Any) -> Executor:
        """An executor over the caller's own DB-API connection; durq never commits it."""

    def foreign_executor(self, connection: Any) -> Executor:
        """SQLAlchemy Connection/Session → text(); else a DB-API connection of the dialect."""
        if hasattr(connection, "execute") and hasattr(connection, "get_bind"):  # Session
            connection = connection.connection()
        if type(connection).__module__.startswith("sqlalchemy"):
            return SqlAlchemyExecutor(connection, self.queries, self.dialect)
        return self.foreign(connection)

    @abstractmethod
    def close(self) -> None: ...

    def setup_warnings(self) -> list[str]:
        """What in this process's setup makes the database work slower than it should (the
        worker logs each at start)."""
        return []

    def is_transient(self, exc: BaseException) -> bool:
        """True for errors worth retrying as they are (the connection dropped, the server
        restarts, a lock is busy); False for errors the same request will hit again."""
        return isinstance(exc, DatabaseUnavailable)

    def listen(self) -> Listener:
        """A dedicated connection listening for job notifications."""
        raise NotImplementedError(f"{self.dialect} has no notifications; workers poll")

    async def loop_connection(self) -> LoopConnection:
        """A connection awaited on the caller's event loop (``capabilities.loop_connections``).
        Raises ``DatabaseUnavailable`` when the database cannot be reached."""
        raise NotImplementedError(
            f"{self.dialect} has no event-loop connections; run its statements in a thread"
        )

    def wake_listeners(self, queues: Iterable[str]) -> int:
        """After a commit that made jobs ready in ``queues``: wake listeners in other
        processes (``capabilities.wake_after_commit``); how many wake-ups went out."""
        return 0

    # ---- values across the driver ----------------------------------------------------

    @abstractmethod
    def now_param(self) -> Any:
        """The ``:now`` parameter (SQLite binds Python's clock; PostgreSQL ignores it)."""

    @abstractmethod
    def list_param(self, values: Sequence[Any] | None) -> Any: ...

    @abstractmethod
    def ts_param(self, value: datetime | None) -> Any: ...

    @abstractmethod
    def ts_out(self, value: Any) -> datetime | None: ...

    # ---- schema ----------------------------------------------------------------------

    @abstractmethod
    def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied."""

    @abstractmethod
    def applied_migrations(self) -> list[int]: ...

    def migration_sql(self) -> str:
        return "\n\n".join(sql for _, _, sql in migrations_in(self.folder / "migrations"))

    def known_migrations(self) -> list[int]:
        return [v for v, _, _ in migrations_in(self.folder / "migrations")]
