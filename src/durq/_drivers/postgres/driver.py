"""PostgreSQL through psycopg 3: a connection pool, SKIP LOCKED claims, LISTEN/NOTIFY."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection as PsycopgConnection
from psycopg import errors as pg_errors
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import ConfigurationError, DatabaseUnavailable, LeaseLost, SchemaOutOfDate
from ...keys import Breaker
from ...settings import redact_url
from ...types import Finished, Job
from ..base import Capabilities, FinishRequest, LoopConnection, NewJob
from ..driver import Driver
from ..rows import finish_row, json_param
from ..sql import Executor, Queries, migrations_in
from .pool import POOL_NAME, DurqPool

__all__ = ["PostgresDriver", "PsycopgExecutor", "conninfo_from_url"]

_COLUMNS: dict[str, list[str]] = {}  # column names of each named block's result


class PsycopgExecutor:
    """A psycopg 3 (or psycopg2) connection: ``%(name)s`` placeholders."""

    dialect = "postgresql"

    def __init__(self, conn: Any, queries: Queries, *, prepare: bool | None = None) -> None:
        self.conn = conn
        self.queries: Queries = queries
        self._psycopg3 = isinstance(conn, PsycopgConnection)
        # False: never a server-side prepared statement (PgBouncer in transaction mode),
        # even on a caller's connection that would prepare after a few executions.
        self._prepare = {"prepare": False} if prepare is False and self._psycopg3 else {}

    def run(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._psycopg3:
            # A named block always returns the same columns: read their names once.
            # (cursor.description builds a Column object per column on every call, which
            # costs more client time than a small statement itself.)
            with self.conn.cursor(row_factory=tuple_row) as cur:
                cur.execute(self.queries.pyformat[name], params or {}, **self._prepare)
                result = cur.pgresult
                if result is None or not result.nfields:
                    return []
                cols = _COLUMNS.get(name)
                if cols is None or len(cols) != result.nfields:
                    cols = _COLUMNS[name] = [
                        (result.fname(i) or b"").decode() for i in range(result.nfields)
                    ]
                return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        with self.conn.cursor() as cur:
            cur.execute(self.queries.pyformat[name], params or {})
            if cur.description is None:
                return []
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Sequence[Any]]:
        if not self._psycopg3:
            return [tuple(row.values()) for row in self.run(name, params)]
        with self.conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(self.queries.pyformat[name], params or {}, **self._prepare)
            return cur.fetchall() if cur.pgresult is not None and cur.pgresult.nfields else []


def conninfo_from_url(url: str) -> str:
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


class PostgresDriver(Driver):
    dialect = "postgresql"
    capabilities = Capabilities(listen_notify=True, loop_connections=True)
    folder = Path(__file__).parent

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, pgbouncer: bool = False
    ) -> None:
        super().__init__(url)
        self.conninfo = conninfo_from_url(url)
        #: Behind PgBouncer in transaction mode a prepared statement lives on one server
        #: connection and the next transaction may get another: prepare nothing.
        self.pgbouncer = pgbouncer
        self.connect_kwargs: dict[str, Any] = {"prepare_threshold": None} if pgbouncer else {}
        self.min_size = min_size
        self.max_size = max(max_size, min_size, 1)
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()

    # ---- connections -------------------------------------------------------------------

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection[Any]:
        """A dedicated connection (LISTEN, benchmarks). Raises ``DatabaseUnavailable``."""
        try:
            return psycopg.connect(
                self.conninfo, autocommit=autocommit, connect_timeout=10, **self.connect_kwargs
            )
        except psycopg.OperationalError as exc:
            raise _cannot_connect(self.url, exc) from exc

    def is_transient(self, exc: BaseException) -> bool:
        # OperationalError covers lost connections, shutdowns and serialization failures.
        return isinstance(
            exc,
            DatabaseUnavailable | psycopg.OperationalError | psycopg.InterfaceError | PoolTimeout,
        )

    def listen(self) -> PgListener:
        conn = self.connect(autocommit=True)
        try:
            self._executor(conn).run("listen_jobs")
        except BaseException:
            conn.close()
            raise
        return PgListener(conn)

    def _get_pool(self) -> ConnectionPool:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self.connect().close()  # fail fast with a clear error, not a pool timeout
                    self._pool = DurqPool(
                        self.conninfo,
                        min_size=self.min_size,
                        max_size=self.max_size,
                        open=True,
                        name=POOL_NAME,
                        configure=_configure,
                        # A connection the server dropped (a restart, a killed backend)
                        # is found on checkout and replaced, never handed out again.
                        check=ConnectionPool.check_connection,
                        kwargs=self.connect_kwargs,
                    )
        return self._pool

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        with _translated(self.url), self._get_pool().connection() as conn:
            yield self._executor(conn)

    read = transaction

    @contextmanager
    def autocommit(self) -> Iterator[Executor]:
        # One round trip for a one-statement write, instead of BEGIN, the statement, COMMIT.
        with _translated(self.url), self._get_pool().connection() as conn:
            conn.autocommit = True
            try:
                yield self._executor(conn)
            finally:
                if not conn.closed:
                    conn.autocommit = False

    async def loop_connection(self) -> LoopConnection:
        return await _LoopConnection.connect(self)

    def foreign(self, connection: Any) -> Executor:
        module = type(connection).__module__
        if module.startswith(("psycopg", "psycopg2")):
            return self._executor(connection)
        raise ConfigurationError(
            f"connection= got a {type(connection).__name__} from {module!r}, but this App uses "
            "PostgreSQL: pass a psycopg connection, or a SQLAlchemy Connection/Session bound "
            "to the same PostgreSQL database"
        )

    def _executor(self, conn: Any) -> PsycopgExecutor:
        return PsycopgExecutor(conn, self.queries, prepare=False if self.pgbouncer else None)

    def setup_warnings(self) -> list[str]:
        if psycopg.pq.__impl__ != "python":
            return []
        return [
            "psycopg runs its pure-Python build here, which decodes rows several times "
            "slower than its C build: a worker drains about half as many jobs per second. "
            "Install durq[postgres-binary] (or psycopg[c])"
        ]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # ---- values ------------------------------------------------------------------------

    def now_param(self) -> Any:
        return None

    def list_param(self, values: Sequence[Any] | None) -> Any:
        return None if values is None else list(values)

    def ts_param(self, value: datetime | None) -> Any:
        return value

    def ts_out(self, value: Any) -> datetime | None:
        if value is None or value.tzinfo is UTC:  # durq's own connections speak UTC
            return value  # type: ignore[no-any-return]
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    # ---- schema ------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self.transaction() as ex:
            # One migrator at a time, however many start at once (even the bookkeeping
            # table's CREATE IF NOT EXISTS races without the lock).
            ex.run("migrations_lock")
            ex.run("migrations_table")
            done = {int(r["version"]) for r in ex.run("migrations_applied")}
            conn = ex.conn  # type: ignore[attr-defined]
            for version, name, sql in migrations_in(self.folder / "migrations"):
                if version in done:
                    continue
                conn.execute(sql)  # a trusted file shipped in the package, no parameters
                ex.run("migration_record", {"version": version, "name": name})
                applied.append(version)
        return applied

    def applied_migrations(self) -> list[int]:
        with self.read() as ex:  # a read: works for a read-only role or a replica
            if not ex.run("migrations_exists"):
                return []
            return [int(r["version"]) for r in ex.run("migrations_applied")]

    # ---- bulk enqueue: one multi-row statement -----------------------------------------

    def job_insert_many(self, ex: Executor, jobs: Sequence[NewJob]) -> list[Any]:
        if _copyable(ex, jobs):
            assert isinstance(ex, PsycopgExecutor)
            return self._copy_in(ex, jobs)
        rows = ex.run(
            "job_insert_many",
            {
                "queues": [j.queue for j in jobs],
                "tasks": [j.task for j in jobs],
                "args": [j.args_json for j in jobs],
                "priorities": [j.priority for j in jobs],
                "run_ats": [j.run_at for j in jobs],
                "delays": [j.delay for j in jobs],
                "max_attempts": [j.max_attempts for j in jobs],
                "retry_policies": [j.retry_policy_json for j in jobs],
                "created_bys": [j.created_by for j in jobs],
                "trace_contexts": [j.trace_context for j in jobs],
            },
        )
        ex.run("job_notify", {"queues": sorted({j.queue for j in jobs})})
        return sorted((self.job_from_row(r) for r in rows), key=lambda job: job.id)

    def job_insert_many_ids(self, ex: Executor, jobs: Sequence[NewJob]) -> list[int]:
        if _copyable(ex, jobs):
            assert isinstance(ex, PsycopgExecutor)
            return self._copy_rows(ex, jobs)[0]
        return [job.id for job in self.job_insert_many(ex, jobs)]

    def _copy_in(self, ex: PsycopgExecutor, jobs: Sequence[NewJob]) -> list[Job]:
        ids, now = self._copy_rows(ex, jobs)
        policies: dict[str, dict[str, Any]] = {}
        return [
            self.job_from_new(new, job_id, now, now, policies)
            for job_id, new in zip(ids, jobs, strict=True)
        ]

    def _copy_rows(self, ex: PsycopgExecutor, jobs: Sequence[NewJob]) -> tuple[list[int], datetime]:
        """COPY jobs that run now: ids are reserved first (with the transaction's clock),
        every other column is its default, so the Jobs are known without reading back."""
        reserved = ex.run("job_ids_reserve", {"count": len(jobs)})[0]
        now = self.ts_out(reserved["now"]) or datetime.now(UTC)
        ids: list[int] = reserved["ids"]
        with ex.conn.cursor() as cur, cur.copy(self.queries.named["job_copy_in"]) as copy:
            for job_id, new in zip(ids, jobs, strict=True):
                copy.write_row(
                    (
                        job_id,
                        new.queue,
                        new.task,
                        new.args_json,
                        new.priority,
                        new.max_attempts,
                        new.retry_policy_json,
                        new.created_by,
                        new.trace_context,
                    )
                )
        ex.run("job_notify", {"queues": sorted({j.queue for j in jobs})})
        return ids, now

    # ---- the worker's batched writes: one statement each -------------------------------

    def job_finish_many(
        self, ex: Executor, reqs: Sequence[FinishRequest]
    ) -> list[Finished | LeaseLost]:
        """All outcomes in one fenced statement (attempt records included); a request
        whose lease was lost comes back as ``LeaseLost``."""
        if not reqs or any(req.artifacts for req in reqs):
            return super().job_finish_many(ex, reqs)
        return self._finished_from_rows(
            reqs, ex.run("job_finish_many", self.finish_many_params(reqs))
        )

    def _finished_from_rows(
        self, reqs: Sequence[FinishRequest], rows: Sequence[Mapping[str, Any]]
    ) -> list[Finished | LeaseLost]:
        """Each request's answer from ``job_finish_many``'s rows: ``LeaseLost`` if absent."""
        written = {row["id"]: self.finished_from_row(row) for row in rows}
        return [written.get(req.job_id) or LeaseLost(req.job_id, req.claim_version) for req in reqs]

    @staticmethod
    def finish_many_params(reqs: Sequence[FinishRequest]) -> dict[str, Any]:
        """``job_finish_many``'s parameters: the requests as one JSON array of rows."""
        batch = [
            [
                *finish_row(req),
                req.change.result,
                req.worker_id,
                req.runtime_ms,
                outcome,
                req.traceback,
            ]
            for req in reqs
            for outcome in (req.change.attempt_outcome,)
        ]
        return {"batch": json_param(batch)}

    def finish_batch(self, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
        if any(req.artifacts for req in reqs):
            return super().finish_batch(reqs)
        # One statement: autocommit saves the BEGIN and COMMIT round trips.
        with self.autocommit() as ex:
            return self.job_finish_many(ex, reqs)

    # ---- heartbeats: one statement for every job a worker holds --------------------------

    def job_heartbeat_many(
        self, ex: Executor, held: Sequence[tuple[int, int]], lease_seconds: float
    ) -> dict[int, bool]:
        if not held:
            return {}
        rows = ex.run(
            "job_heartbeat_many",
            {
                "ids": [job_id for job_id, _ in held],
                "claim_versions": [version for _, version in held],
                "lease_seconds": lease_seconds,
            },
        )
        return {int(r["id"]): bool(r["cancel_requested"]) for r in rows}


class PgListener:
    """``LISTEN durq_jobs`` on a dedicated autocommit connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def notifications(self, timeout: float) -> Iterator[str]:
        for note in self.conn.notifies(timeout=timeout):
            yield note.payload

    def close(self) -> None:
        self.conn.close()


class _LoopConnection:
    """A connection awaited on the worker's event loop, autocommit: each claim and each
    batch of outcomes is one statement that commits by itself, as on the pool.

    A statement in a thread waits for the GIL to send and again to decode while the loop
    runs jobs, so a claim left only once the loop went idle; on the loop it is sent at once,
    and its round trip and commit overlap those jobs."""

    def __init__(self, driver: PostgresDriver, conn: psycopg.AsyncConnection[Any]) -> None:
        self._driver = driver
        self._conn = conn
        self._claim_sql = driver.queries.pyformat["job_claim"]
        self._finish_sql = driver.queries.pyformat["job_finish_many"]
        self._breakers_sql = driver.queries.pyformat["breaker_read_many"]
        # Behind PgBouncer in transaction mode nothing is prepared (see PostgresDriver).
        self._prepare: dict[str, Any] = {"prepare": False} if driver.pgbouncer else {}

    @classmethod
    async def connect(cls, driver: PostgresDriver) -> _LoopConnection:
        try:
            conn = await psycopg.AsyncConnection.connect(
                driver.conninfo, autocommit=True, connect_timeout=10, **driver.connect_kwargs
            )
            # Timestamps in UTC, as on the pool's connections (ts_out converts otherwise).
            await conn.execute("SET TIME ZONE 'UTC'")
        except psycopg.OperationalError as exc:
            raise _cannot_connect(driver.url, exc) from exc
        return cls(driver, conn)

    async def job_claim(
        self, *, queue: str, worker_id: str, limit: int, lease_seconds: float
    ) -> list[Job]:
        params = self._driver._claim_params(queue, worker_id, limit, lease_seconds)
        with _translated(self._driver.url):
            async with self._conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(self._claim_sql, params, **self._prepare)
                rows = await cur.fetchall()
        return self._driver._claimed_jobs(rows)

    async def job_finish_many(self, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
        if any(req.artifacts for req in reqs):
            raise ValueError(
                "outcomes with artifacts are written in a transaction: use the driver's "
                "job_finish_many on a pooled connection"
            )
        if not reqs:
            return []
        params = self._driver.finish_many_params(reqs)
        with _translated(self._driver.url):
            async with self._conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(self._finish_sql, params, **self._prepare)
                rows = await cur.fetchall()
        return self._driver._finished_from_rows(reqs, rows)

    async def breaker_read_many(self, keys: Sequence[str]) -> dict[str, Breaker]:
        if not keys:
            return {}
        params = {"keys": self._driver.list_param(sorted(keys)), "now": self._driver.now_param()}
        with _translated(self._driver.url):
            async with self._conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(self._breakers_sql, params, **self._prepare)
                rows = await cur.fetchall()
        return {r["key"]: self._driver.breaker_from_row(r) for r in rows}

    async def close(self) -> None:
        await self._conn.close()


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Each pooled connection reads timestamps in UTC, as durq hands them out, so rows need
    no time-zone conversion. (Behind a transaction-mode PgBouncer the setting may not stick;
    ``ts_out`` then converts, so this is only a saving, never a rule.)"""
    conn.autocommit = True
    conn.execute("SET TIME ZONE 'UTC'")
    conn.autocommit = False


def _copyable(ex: Executor, jobs: Sequence[NewJob]) -> bool:
    """COPY fits a psycopg 3 connection and jobs that run now (run_at is the default)."""
    return (
        isinstance(ex, PsycopgExecutor)
        and isinstance(ex.conn, psycopg.Connection)
        and all(j.run_at is None and not j.delay for j in jobs)
    )


def _cannot_connect(url: str, exc: psycopg.OperationalError) -> DatabaseUnavailable:
    return DatabaseUnavailable(
        f"cannot connect to {redact_url(url)}: {str(exc).strip()}. "
        "Is PostgreSQL running and DURQ_DATABASE_URL right?"
    )


@contextmanager
def _translated(url: str) -> Iterator[None]:
    try:
        yield
    except pg_errors.UndefinedTable as exc:
        raise SchemaOutOfDate(
            f"the durq tables are missing in {redact_url(url)}: run `durq migrate` "
            f"(or App.migrate()) first. ({str(exc).strip().splitlines()[0]})"
        ) from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(
            f"lost the connection to {redact_url(url)}: {str(exc).strip()}"
        ) from exc
