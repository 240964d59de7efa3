"""SQLite, the embedded default: WAL, a busy timeout, one write transaction per claim."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ...errors import ConfigurationError, DatabaseUnavailable, LeaseLost, SchemaOutOfDate
from ...types import Finished, Job, nearest_rank
from ..base import Capabilities, FinishRequest
from ..driver import Driver
from ..rows import finish_row, json_param
from ..sql import Executor, SqliteExecutor, migrations_in, split_statements
from .group import GroupCommit
from .wake import WakeListener, WakeSender, wake_folder

__all__ = ["SqliteDriver", "path_from_url"]

T = TypeVar("T")


def path_from_url(url: str) -> str:
    rest = url.split("://", 1)[1] if "://" in url else url.split(":", 1)[1]
    path = rest[1:] if rest.startswith("/") else rest
    if not path or path == ":memory:":
        raise ConfigurationError(
            f"{url!r} names an in-memory database, which each connection would see empty; "
            "use a file, e.g. sqlite:///durq.db or sqlite:////tmp/durq.db"
        )
    return path


class SqliteDriver(Driver):
    dialect = "sqlite"
    capabilities = Capabilities(listen_notify=False, wake_after_commit=True, group_commit=True)
    folder = Path(__file__).parent

    def __init__(
        self, url: str, *, synchronous: str = "FULL", busy_timeout_ms: int = 30_000
    ) -> None:
        super().__init__(url)
        self.path = path_from_url(url)
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._wake_sender: WakeSender | None = None
        self._write_lock = _write_lock(self.path)
        self._group = GroupCommit(self.transaction)

    # ---- connections -------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,  # durq issues BEGIN/COMMIT itself
                timeout=self.busy_timeout_ms / 1000,
                check_same_thread=False,
            )
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")  # validated Literal
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.OperationalError as exc:
            hint = (
                "another process held it locked for longer than the busy timeout "
                "(raise DURQ_SQLITE_BUSY_TIMEOUT_MS)"
                if "locked" in str(exc)
                else "check that its folder exists and is writable"
            )
            raise DatabaseUnavailable(
                f"cannot open SQLite database {self.path!r} (from {self.url}): {exc}; {hint}"
            ) from exc
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers "locked" at
        # once instead of waiting when several connections open the file together.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _conn(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:  # forked: never share a parent's connections
            self._local = threading.local()
            self._all = []
            self._pid = os.getpid()
            self._write_lock = _write_lock(self.path)
            self._group = GroupCommit(self.transaction)
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.connect()
            self._local.conn = conn
            self._local.depth = 0
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        conn = self._conn()
        ex = SqliteExecutor(conn, self.queries)
        if self._local.depth:  # nested: join the open transaction
            yield ex
            return
        # SQLite has one writer. Threads of this process queue on a lock of their own and
        # are handed the database the moment it is free; without it they would meet in
        # SQLite's busy handler, which sleeps 1 ms growing to 100 ms between tries.
        with self._write_lock, _translated(self.url):
            conn.execute("BEGIN IMMEDIATE")
            self._local.depth = 1
            try:
                yield ex
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._local.depth = 0

    def write_together(self, fn: Callable[[Executor], T]) -> T:
        if getattr(self._local, "depth", 0):  # inside a transaction already: join it
            return fn(SqliteExecutor(self._conn(), self.queries))
        return self._group.run(fn)

    @contextmanager
    def read(self) -> Iterator[Executor]:
        conn = self._conn()
        ex = SqliteExecutor(conn, self.queries)
        if self._local.depth:
            yield ex
            return
        with _translated(self.url):
            conn.execute("BEGIN")
            self._local.depth = 1
            try:
                yield ex
            finally:
                self._local.depth = 0
                conn.execute("COMMIT")

    def foreign(self, connection: Any) -> Executor:
        if isinstance(connection, sqlite3.Connection):
            return SqliteExecutor(connection, self.queries)
        raise ConfigurationError(
            f"connection= got a {type(connection).__name__}, but this App uses SQLite: pass "
            "a sqlite3.Connection, or a SQLAlchemy Connection/Session on the same file"
        )

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all = []
        self._local = threading.local()
        if self._wake_sender is not None:
            self._wake_sender.close()
            self._wake_sender = None

    def listen(self) -> WakeListener:
        return WakeListener(wake_folder(self.path))

    def wake_listeners(self, queues: Iterable[str]) -> int:
        sender = self._wake_sender
        if sender is None or sender.pid != os.getpid():
            sender = self._wake_sender = WakeSender(wake_folder(self.path))
        return sender.send(queues)

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, sqlite3.OperationalError):
            return "locked" in str(exc) or "busy" in str(exc)
        return isinstance(exc, DatabaseUnavailable)

    # ---- values ------------------------------------------------------------------------

    def now_param(self) -> float:
        # Whole microseconds, as a datetime holds them: a time read back and passed in
        # again (e.g. created_after=job.created_at) then compares equal to the stored one.
        return round(time.time(), 6)

    def list_param(self, values: Sequence[Any] | None) -> Any:
        return None if values is None else json.dumps(list(values))

    def ts_param(self, value: datetime | None) -> Any:
        return None if value is None else value.timestamp()

    def ts_out(self, value: Any) -> datetime | None:
        if value is None:
            return None
        return datetime.fromtimestamp(float(value), UTC)

    # ---- schema ------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self.transaction() as ex:
            ex.run("migrations_table")
            done = {int(r["version"]) for r in ex.run("migrations_applied")}
            for version, name, sql in migrations_in(self.folder / "migrations"):
                if version in done:
                    continue
                for statement in split_statements(sql):
                    self._conn().execute(statement)
                ex.run(
                    "migration_record", {"version": version, "name": name, "now": self.now_param()}
                )
                applied.append(version)
        return applied

    def applied_migrations(self) -> list[int]:
        with self.read() as ex:
            if not ex.run("migrations_exists"):
                return []
            return [int(r["version"]) for r in ex.run("migrations_applied")]

    # ---- the claim: limited keys first, then the plain ready scan -----------------------

    def job_claim(
        self, ex: Executor, *, queue: str, worker_id: str, limit: int, lease_seconds: float
    ) -> list[Job]:
        """Jobs with a concurrency key within their key's budget, then plain ready jobs.
        The transaction is BEGIN IMMEDIATE: no other claimer reads a budget meanwhile."""
        now = self.now_param()
        claimed: list[Job] = []
        for row in ex.run("limit_budgets", {"queue": queue, "limit": limit, "now": now}):
            room = min(int(row["budget"]), limit - len(claimed))
            if room <= 0:
                break
            params = {
                "queue": queue,
                "key": row["key"],
                "limit": room,
                "worker_id": worker_id,
                "lease_seconds": lease_seconds,
                "now": now,
            }
            got = ex.values("job_claim_keyed", params)
            if got:
                spend = {"key": row["key"], "n": len(got), "ws": row["ws"], "now": now}
                ex.run("limit_spend", spend)
                claimed.extend(map(self.job_from_values, got))
        if len(claimed) < limit:
            claimed += super().job_claim(
                ex,
                queue=queue,
                worker_id=worker_id,
                limit=limit - len(claimed),
                lease_seconds=lease_seconds,
            )
        return claimed

    # ---- dialect gaps ------------------------------------------------------------------

    def _after_finish(
        self, ex: Executor, job: Job, req: FinishRequest, params: Mapping[str, Any]
    ) -> None:
        if job.state == "succeeded":
            return  # stored on the job row
        ex.run(
            "attempt_insert",
            {
                "job_id": job.id,
                "attempt": job.attempt + params["refund"],
                "claim_version": req.claim_version,
                "worker_id": req.worker_id,
                "started_at": self.ts_param(job.attempted_at),
                "runtime_ms": req.runtime_ms,
                "outcome": "cancelled" if job.state == "cancelled" else params["outcome"],
                "error_code": params["error_code"],
                "error_message": params["error_message"],
                "traceback": req.traceback,
                "now": params["now"],
            },
        )

    def job_finish_many(
        self, ex: Executor, reqs: Sequence[FinishRequest]
    ) -> list[Finished | LeaseLost]:
        """All outcomes in two statements (the jobs, then the attempt records of those that
        did not succeed: a success is stored on the job row); a request whose lease was
        lost comes back as ``LeaseLost``."""
        if not reqs or any(req.artifacts for req in reqs):
            return super().job_finish_many(ex, reqs)
        now = self.now_param()
        batch = [
            [*finish_row(req), None if result is None else json_param(result), req.runtime_ms]
            for req in reqs
            for result in (req.change.result,)
        ]
        rows = ex.run("job_finish_many", {"batch": json_param(batch), "now": now})
        by_id = {req.job_id: req for req in reqs}
        attempts = []
        written: dict[int, Finished] = {}
        for row in rows:
            req = by_id[row["id"]]
            change = req.change
            state = row["state"]
            written[row["id"]] = self.finished_from_row(row)
            if state == "succeeded":
                continue
            attempts.append(
                [
                    row["id"],
                    row["attempt"] + (1 if change.refund_attempt else 0),
                    req.claim_version,
                    req.worker_id,
                    row["attempted_at"],
                    req.runtime_ms,
                    "cancelled" if state == "cancelled" else change.attempt_outcome,
                    change.error_code,
                    change.error_message,
                    req.traceback,
                ]
            )
        if attempts:
            ex.run("attempt_insert_many", {"batch": json_param(attempts), "now": now})
        return [written.get(req.job_id) or LeaseLost(req.job_id, req.claim_version) for req in reqs]

    def _before_requeue(self, ex: Executor, params: Mapping[str, Any]) -> None:
        ex.run("success_keep", params)

    def queue_ready_ages(self, ex: Executor) -> list[tuple[str, int, float, float]]:
        # SQLite has no percentile function: read the nearest-rank row per queue.
        now = self.now_param()
        out = []
        for row in ex.run("queue_ready_ages", {"now": now}):
            ready, oldest = int(row["ready"]), float(row["oldest_age"])
            rank = nearest_rank(ready, 0.95)
            at = ex.run("queue_ready_age_at", {"queue": row["queue"], "rank": rank, "now": now})
            out.append((row["queue"], ready, oldest, float(at[0]["age"]) if at else oldest))
        return out


def _write_lock(path: str) -> threading.Lock:
    """The process's lock for writing to the database file at ``path``."""
    key = os.path.realpath(path)
    with _WRITE_LOCKS_GUARD:
        if _WRITE_LOCKS_PID[0] != os.getpid():  # forked: a parent's holder is not here
            _WRITE_LOCKS.clear()
            _WRITE_LOCKS_PID[0] = os.getpid()
        lock = _WRITE_LOCKS.get(key)
        if lock is None:
            lock = _WRITE_LOCKS[key] = threading.Lock()
        return lock


_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()
_WRITE_LOCKS_PID = [os.getpid()]


@contextmanager
def _translated(url: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise SchemaOutOfDate(
                f"the durq tables are missing in {url}: run `durq migrate` "
                f"(or App.migrate()) first. ({exc})"
            ) from exc
        raise
