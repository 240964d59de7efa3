"""The driver core: connections and transactions, the caller's own connections, errors,
notifications, values across the wire, and migrations."""

from __future__ import annotations

import dataclasses
import re
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.orm import Session

import durq._drivers
from durq._drivers import Capabilities, Driver, open_driver
from durq._drivers.postgres.driver import PostgresDriver, conninfo_from_url
from durq._drivers.sql import migrations_in
from durq._drivers.sqlite.driver import SqliteDriver, path_from_url
from durq.errors import ConfigurationError, DatabaseUnavailable
from durq.types import JobState

from ..waiting import wait_until
from .helpers import JobFactory, PlainSql, ago, get, insert, near

DRIVERS_DIR = Path(durq._drivers.__file__).parent
IntegrityError = (sqlite3.IntegrityError, psycopg.IntegrityError)


def _count_jobs(sql: PlainSql) -> int:
    return int(sql.scalar("SELECT count(*) FROM durq_jobs"))


@contextmanager
def _dbapi(db_url: str) -> Iterator[Any]:
    """The caller's own DB-API connection, in a transaction it controls."""
    conn: Any
    if db_url.startswith("sqlite:"):
        conn = sqlite3.connect(path_from_url(db_url))  # opens a transaction before a write
    else:
        conn = psycopg.connect(conninfo_from_url(db_url))
    try:
        yield conn
    finally:
        conn.close()


def _unreachable_url(db_url: str, tmp_path: Path) -> str:
    if db_url.startswith("sqlite:"):
        return f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'durq.db'}"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/durq"


# ---- transactions --------------------------------------------------------------------


def test_transaction_commits_when_the_block_ends(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    with driver.transaction() as ex:
        driver.job_insert(ex, new_job())
        driver.job_insert(ex, new_job())
        assert _count_jobs(sql) == 0  # other connections see nothing yet
    assert _count_jobs(sql) == 2


def test_transaction_rolls_back_when_the_block_raises(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    with pytest.raises(RuntimeError, match="abort"), driver.transaction() as ex:
        job = driver.job_insert(ex, new_job())
        assert driver.job_get(ex, job.id) == job  # visible inside
        raise RuntimeError("abort")
    assert _count_jobs(sql) == 0
    with driver.transaction() as ex:  # the connection is usable again
        driver.job_insert(ex, new_job())
    assert _count_jobs(sql) == 1


def test_read_sees_what_other_connections_committed(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    job = insert(driver, new_job())
    sql.rows("UPDATE durq_jobs SET priority = 77 WHERE id = :id", id=job.id)
    with driver.read() as ex:
        seen = driver.job_get(ex, job.id)
    assert seen is not None and seen.priority == 77


def test_autocommit_writes_are_visible_to_other_connections(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    with driver.autocommit() as ex:
        job = driver.job_insert(ex, new_job())
        # Each statement commits by itself on PostgreSQL; SQLite, where that saves nothing,
        # runs the block as one transaction.
        assert _count_jobs(sql) == (1 if driver.dialect == "postgresql" else 0)
        driver.queue_set_paused(ex, "q", True)
    assert _count_jobs(sql) == 1
    assert sql.scalar("SELECT paused FROM durq_queues WHERE name = 'q'") in (True, 1)
    assert get(driver, job.id) == job


# ---- the caller's own connections ----------------------------------------------------


def test_foreign_writes_in_the_callers_transaction(
    driver: Driver, db_url: str, new_job: JobFactory, sql: PlainSql
) -> None:
    with _dbapi(db_url) as conn:
        ex = driver.foreign(conn)
        assert ex.dialect == driver.dialect
        driver.job_insert(ex, new_job())
        conn.rollback()
        assert _count_jobs(sql) == 0
        kept = driver.job_insert(ex, new_job("kept"))
        assert _count_jobs(sql) == 0  # not before the caller commits
        conn.commit()
    assert get(driver, kept.id) == kept


def test_foreign_refuses_a_connection_of_another_kind(driver: Driver, db_url: str) -> None:
    other: Any = object()
    with pytest.raises(ConfigurationError, match="connection="):
        driver.foreign(other)
    if isinstance(driver, PostgresDriver):
        sqlite_conn = sqlite3.connect(":memory:")
        with pytest.raises(ConfigurationError, match="PostgreSQL"):
            driver.foreign(sqlite_conn)
        sqlite_conn.close()
    else:
        with _dbapi(db_url) as conn, pytest.raises(ConfigurationError):
            driver.foreign(conn.cursor())  # a cursor is not a connection


def test_foreign_executor_runs_on_a_sqlalchemy_connection(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    with sql.engine.connect() as conn:
        ex = driver.foreign_executor(conn)
        assert ex.dialect == driver.dialect
        driver.job_insert(ex, new_job())
        conn.rollback()
    assert _count_jobs(sql) == 0
    with sql.engine.connect() as conn:
        ex = driver.foreign_executor(conn)
        job = driver.job_insert(ex, new_job())
        (claimed,) = driver.job_claim(ex, queue="default", worker_id="w", limit=5, lease_seconds=9)
        conn.commit()
    assert claimed.id == job.id and claimed.state == JobState.RUNNING
    assert get(driver, job.id) == claimed


def test_foreign_executor_runs_on_a_sqlalchemy_session_and_dbapi_connection(
    driver: Driver, db_url: str, new_job: JobFactory, sql: PlainSql
) -> None:
    with Session(sql.engine) as session:
        job = driver.job_insert(driver.foreign_executor(session), new_job("via-session"))
        session.commit()
    assert get(driver, job.id) == job
    with _dbapi(db_url) as conn:
        other = driver.job_insert(driver.foreign_executor(conn), new_job("via-dbapi"))
        conn.commit()
    assert get(driver, other.id) == other


# ---- lifecycle and errors ------------------------------------------------------------


def test_close_closes_the_connections_and_the_driver_reopens_on_use(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job())
    with driver.read() as ex:
        conn = getattr(ex, "conn")  # noqa: B009 - the executor's own connection
    driver.close()
    driver.close()  # closing twice is harmless
    with pytest.raises((sqlite3.ProgrammingError, psycopg.OperationalError)):
        conn.execute("SELECT 1")
    assert get(driver, job.id) == job


def test_is_transient_for_an_unreachable_database(db_url: str, tmp_path: Path) -> None:
    unreachable = open_driver(_unreachable_url(db_url, tmp_path))
    try:
        with pytest.raises(DatabaseUnavailable) as caught, unreachable.read() as ex:
            unreachable.ping(ex)
        assert unreachable.is_transient(caught.value)
    finally:
        unreachable.close()


def test_is_transient_for_a_lock_held_too_long(driver: Driver, db_url: str) -> None:
    holder: Any
    if isinstance(driver, SqliteDriver):
        impatient = open_driver(db_url, sqlite_busy_timeout_ms=0)
        holder = sqlite3.connect(driver.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    else:
        impatient = open_driver(f"{db_url}?options=-c%20lock_timeout%3D50")
        holder = psycopg.connect(conninfo_from_url(db_url))
        holder.execute("LOCK TABLE durq_leaders IN ACCESS EXCLUSIVE MODE")
    try:
        busy = (sqlite3.OperationalError, DatabaseUnavailable)
        with pytest.raises(busy) as caught, impatient.transaction() as ex:
            impatient.leader_acquire(ex, "role", "me", 30)
        assert impatient.is_transient(caught.value), repr(caught.value)
    finally:
        holder.rollback()
        holder.close()
        impatient.close()


def test_is_transient_is_false_for_errors_a_retry_repeats(driver: Driver) -> None:
    with driver.transaction() as ex:
        driver.key_insert(ex, key_id="k", owner="o", role="r", key_hash="h")
    with pytest.raises(IntegrityError) as caught, driver.transaction() as ex:
        driver.key_insert(ex, key_id="k", owner="o", role="r", key_hash="h2")
    assert driver.is_transient(caught.value) is False
    assert driver.is_transient(ValueError("bad input")) is False
    assert driver.is_transient(DatabaseUnavailable("server restarting")) is True


# ---- notifications -------------------------------------------------------------------


def test_listen_hears_the_queues_of_jobs_as_they_commit(
    driver: Driver, new_job: JobFactory
) -> None:
    if not driver.capabilities.listen_notify:
        pytest.skip("no notifications inside transactions: see test_wake_listeners_*")
    listener = driver.listen()
    try:
        with driver.transaction() as first:
            driver.job_insert(first, new_job(queue="first"))
            with driver.transaction() as second:  # another pool connection commits first
                driver.job_insert(second, new_job(queue="second"))
        with driver.transaction() as ex:
            driver.job_insert_many(ex, [new_job(queue=q) for q in ("a", "b", "a")])
        heard: list[str] = []
        for queue in listener.notifications(timeout=10):
            heard.append(queue)
            if len(heard) == 4:
                break
        assert heard[:2] == ["second", "first"]  # delivered at commit, in commit order
        assert sorted(heard[2:]) == ["a", "b"]  # once per queue per transaction
    finally:
        listener.close()


def _heard(listener: Any, count: int) -> list[str]:
    heard: list[str] = []
    deadline = time.monotonic() + 10
    while len(heard) < count and time.monotonic() < deadline:
        heard += listener.notifications(timeout=0.5)
    return heard


def test_wake_listeners_reaches_every_listener_of_the_database(driver: Driver) -> None:
    if not driver.capabilities.wake_after_commit:
        assert driver.wake_listeners(["default"]) == 0  # NOTIFY travels with the commit
        return
    assert driver.wake_listeners(["default"]) == 0  # nobody listens yet
    listeners = [driver.listen(), driver.listen()]
    try:
        assert driver.wake_listeners(["default", "emails"]) == 4
        for listener in listeners:
            assert sorted(_heard(listener, 2)) == ["default", "emails"]
        # A listener whose process died leaves its entry behind: the next send drops it.
        gone = listeners.pop()
        gone._sock.close()  # type: ignore[attr-defined]  # the process is gone, not closed
        assert driver.wake_listeners(["default"]) == 1
        assert not Path(gone.entry).exists()  # type: ignore[attr-defined]
        assert driver.wake_listeners(["default"]) == 1
    finally:
        for listener in listeners:
            listener.close()


def test_wake_listeners_with_a_path_too_long_for_a_socket(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the abstract socket namespace is Linux's")
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    driver = SqliteDriver(f"sqlite:///{deep / 'durq.db'}")
    listener = driver.listen()
    try:
        assert Path(listener.entry).is_file()  # a marker: the socket is abstract
        assert driver.wake_listeners(["default"]) == 1
        assert _heard(listener, 1) == ["default"]
    finally:
        listener.close()
        driver.close()
    assert driver.wake_listeners(["default"]) == 0  # closed: its marker is gone


def test_capabilities_say_what_the_database_offers(driver: Driver) -> None:
    caps = driver.capabilities
    assert isinstance(caps, Capabilities)
    assert caps.listen_notify is (driver.dialect == "postgresql")
    assert caps.wake_after_commit is (driver.dialect == "sqlite")
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.listen_notify = not caps.listen_notify  # type: ignore[misc]


def test_dialect_names_the_database_and_its_executors(driver: Driver, db_url: str) -> None:
    assert driver.dialect == ("sqlite" if db_url.startswith("sqlite:") else "postgresql")
    for opened in (driver.transaction(), driver.read(), driver.autocommit()):
        with opened as ex:
            assert ex.dialect == driver.dialect


# ---- the named SQL blocks ------------------------------------------------------------

_NAME_RE = re.compile(r"^--\s*name:\s*([a-z_]+)\s*$", re.MULTILINE)
_BLOCK_RE = re.compile(r'(?:ex\.(?:run|values)\(|_key_write\(\s*ex,)\s*"([a-z_]+)"')


def test_queries_define_every_block_the_operations_run(driver: Driver) -> None:
    sources = [*DRIVERS_DIR.glob("*.py"), driver.folder / "driver.py"]
    used = {name for path in sources for name in _BLOCK_RE.findall(path.read_text())}
    assert {"job_claim", "job_finish", "leader_acquire", "api_key_insert"} <= used
    assert used <= set(driver.queries.named), sorted(used - set(driver.queries.named))
    assert set(driver.queries.pyformat) == set(driver.queries.named)
    assert not any("{job_columns}" in sql for sql in driver.queries.named.values())


def test_folder_holds_this_dialects_sql_and_migrations(driver: Driver) -> None:
    folder = driver.folder
    assert folder.name == driver.dialect.replace("postgresql", "postgres")
    assert (folder / "queries.sql").is_file() and (folder / "migrations").is_dir()
    own = {name for path in folder.glob("*.sql") for name in _NAME_RE.findall(path.read_text())}
    assert {"job_columns", "job_claim", "job_finish"} <= own <= set(driver.queries.named)


# ---- values across the driver --------------------------------------------------------


def test_now_param_gives_the_statements_a_clock_that_agrees_with_python(driver: Driver) -> None:
    with driver.read() as ex:
        (row,) = ex.run("db_now", {"now": driver.now_param()})
    assert near(driver.ts_out(row["now"]), ago(0))


def test_list_param_binds_a_list_of_values(driver: Driver, new_job: JobFactory) -> None:
    a, b, c = (insert(driver, new_job()) for _ in range(3))
    assert driver.list_param(None) is None
    with driver.transaction() as ex:
        ex.run("job_delete_many", {"ids": driver.list_param([a.id, c.id])})
        ex.run("job_delete_many", {"ids": driver.list_param([])})
    with driver.read() as ex:
        assert [driver.job_get(ex, j.id) is not None for j in (a, b, c)] == [False, True, False]


def test_ts_param_and_ts_out_round_trip_an_aware_time(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    plus_two = timezone(timedelta(hours=2))
    when = datetime(2032, 2, 29, 23, 59, 58, 123456, tzinfo=plus_two)
    assert driver.ts_param(None) is None and driver.ts_out(None) is None
    back = driver.ts_out(driver.ts_param(when))
    assert back == when and back is not None and back.utcoffset() == timedelta(0)
    job = insert(driver, new_job(run_at=when))
    stored = sql.scalar("SELECT run_at FROM durq_jobs WHERE id = :id", id=job.id)
    assert driver.ts_out(stored) == when == job.run_at
    assert job.run_at.tzinfo == UTC


def test_ts_out_reads_every_stored_time_as_aware_utc(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    job = insert(driver, new_job())
    row = sql.one("SELECT created_at, updated_at, run_at FROM durq_jobs WHERE id = :id", id=job.id)
    for value in row.values():
        out = driver.ts_out(value)
        assert out is not None and out.utcoffset() == timedelta(0)
        assert near(out, job.created_at)


# ---- migrations ----------------------------------------------------------------------


def test_migrate_applies_every_known_migration_once(fresh_url: str, new_job: JobFactory) -> None:
    fresh = open_driver(fresh_url)
    try:
        assert fresh.migrate() == fresh.known_migrations()
        assert fresh.migrate() == []
        assert fresh.applied_migrations() == fresh.known_migrations()
        with fresh.transaction() as ex:  # the schema works
            job = fresh.job_insert(ex, new_job())
            assert fresh.job_get(ex, job.id) == job
    finally:
        fresh.close()


def test_applied_migrations_lists_what_the_database_has(driver: Driver, fresh_url: str) -> None:
    assert driver.applied_migrations() == driver.known_migrations()
    fresh = open_driver(fresh_url)
    try:
        assert fresh.applied_migrations() == []
    finally:
        fresh.close()


def test_applied_migrations_of_a_fresh_database_writes_nothing(
    driver: Driver, fresh_url: str, request: pytest.FixtureRequest
) -> None:
    fresh = open_driver(fresh_url)
    try:
        assert fresh.applied_migrations() == []
        with fresh.read() as ex:
            assert ex.run("migrations_exists") == []
    finally:
        fresh.close()


def test_known_migrations_are_numbered_alike_on_both_dialects(driver: Driver) -> None:
    known = driver.known_migrations()
    assert known == sorted(set(known)) and known[0] == 1
    assert known == list(range(1, len(known) + 1))
    for dialect in ("sqlite", "postgres"):
        assert [v for v, _, _ in migrations_in(DRIVERS_DIR / dialect / "migrations")] == known


def test_migration_sql_is_every_migration_in_order(driver: Driver) -> None:
    script = driver.migration_sql()
    texts = [sql for _, _, sql in migrations_in(driver.folder / "migrations")]
    positions = [script.index(text) for text in texts]
    assert positions == sorted(positions) and len(texts) == len(driver.known_migrations())
    assert "CREATE TABLE durq_jobs" in script


# ---- concrete drivers: a dedicated connection ----------------------------------------


def test_connect_opens_a_dedicated_connection(driver: Driver, db_url: str, tmp_path: Path) -> None:
    if isinstance(driver, SqliteDriver):
        conn = driver.connect()
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
            assert conn.execute("PRAGMA busy_timeout").fetchone() == (driver.busy_timeout_ms,)
            assert conn.isolation_level is None  # durq issues BEGIN itself
        finally:
            conn.close()
        unreachable: Driver = open_driver(_unreachable_url(db_url, tmp_path))
        assert isinstance(unreachable, SqliteDriver)
        with pytest.raises(DatabaseUnavailable, match="cannot open SQLite database"):
            unreachable.connect()
        return
    assert isinstance(driver, PostgresDriver)
    with driver.connect(autocommit=True) as pg_conn:
        assert pg_conn.autocommit is True
        name = pg_conn.execute("SELECT current_database()").fetchone()
        assert name is not None and db_url.endswith("/" + name[0])
    with driver.connect() as pg_conn:
        assert pg_conn.autocommit is False
    far = open_driver(_unreachable_url(db_url, tmp_path))
    assert isinstance(far, PostgresDriver)
    with pytest.raises(DatabaseUnavailable, match="Is PostgreSQL running"):
        far.connect()


def test_transaction_writers_of_one_process_take_turns_on_sqlite(tmp_path: Path) -> None:
    # With SQLite's own busy wait switched off, a second writer would fail at once with
    # "database is locked": it succeeds because the process hands the file over itself.
    url = f"sqlite:///{tmp_path / 'turns.db'}"
    first, second = SqliteDriver(url), SqliteDriver(url, busy_timeout_ms=0)
    first.migrate()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with first.transaction() as ex:
            ex.run("queue_set_paused", {"name": "q", "paused": True, "now": first.now_param()})
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    done = threading.Event()

    def write() -> None:
        with second.transaction() as ex:
            ex.run("queue_set_paused", {"name": "r", "paused": True, "now": second.now_param()})
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert not done.wait(0.2)  # it waits its turn rather than failing
    release.set()
    holder.join(10)
    writer.join(10)
    assert done.is_set()
    with second.read() as ex:
        assert {q["name"] for q in ex.run("queue_list")} == {"q", "r"}
    first.close()
    second.close()


# ---- write_together ------------------------------------------------------------------


def _pause(driver: Driver, ex: Any, name: str) -> str:
    driver.queue_set_paused(ex, name, True)
    return name


def _queue_names(driver: Driver) -> set[str]:
    with driver.read() as ex:
        return {name for name, _ in driver.queue_list(ex)}


def test_write_together_commits_the_write_and_answers_its_value(driver: Driver) -> None:
    assert driver.write_together(lambda ex: _pause(driver, ex, "a")) == "a"
    assert _queue_names(driver) == {"a"}

    def fails(ex: Any) -> None:
        _pause(driver, ex, "b")
        raise ValueError("undo me")

    with pytest.raises(ValueError, match="undo me"):
        driver.write_together(fails)
    assert _queue_names(driver) == {"a"}  # the failed write left nothing behind


def test_write_together_shares_one_commit_and_undoes_only_the_failed_write(
    tmp_path: Path,
) -> None:
    driver = SqliteDriver(f"sqlite:///{tmp_path / 'group.db'}")
    driver.migrate()
    group = driver._group
    blocker_in, blocker_out = threading.Event(), threading.Event()

    def block() -> None:  # a write of another thread holds the database meanwhile
        with driver.transaction():
            blocker_in.set()
            blocker_out.wait(10)

    holder = threading.Thread(target=block)
    holder.start()
    assert blocker_in.wait(10)
    results: dict[str, object] = {}

    def write(name: str) -> None:
        def fn(ex: Any) -> str:
            _pause(driver, ex, name)
            if name == "bad":
                raise ValueError("bad write")
            return name

        try:
            results[name] = driver.write_together(fn)
        except ValueError as exc:
            results[name] = exc

    threads = [threading.Thread(target=write, args=(n,)) for n in ("first", "x", "bad", "y")]
    threads[0].start()
    # The first leads, takes itself as a group and waits for the database ...
    wait_until(lambda: group._leading and not group._queue, what="a leader waiting its turn")
    for t in threads[1:]:
        t.start()
    # ... while the others queue behind it, to be committed as the next group.
    wait_until(lambda: len(group._queue) == 3, what="three writes queued")
    blocker_out.set()
    for t in [holder, *threads]:
        t.join(10)
    assert (results["first"], results["x"], results["y"]) == ("first", "x", "y")
    assert isinstance(results["bad"], ValueError)
    assert _queue_names(driver) == {"first", "x", "y"}
    assert (group.commits, group.writes) == (2, 4)  # the three queued shared one commit
    driver.close()


def test_setup_warnings_name_only_a_pure_python_psycopg(driver: Driver) -> None:
    """The C build runs here (the suite's install); the pure-Python one is warned about at
    worker start (tests/cli/test_worker_cli.py runs a worker on it)."""
    warnings = driver.setup_warnings()
    if driver.dialect == "postgresql" and psycopg.pq.__impl__ == "python":
        assert len(warnings) == 1 and "durq[postgres-binary]" in warnings[0]
    else:
        assert warnings == []
