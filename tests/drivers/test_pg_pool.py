"""The PostgreSQL pool's checkout check: skipped for a connection back moments ago in good
order with nothing waiting on its socket (it costs a round trip), made when the server has
closed the connection since, and made again on every checkout once a connection died, so a
restarted server is found on checkout."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from durq._drivers.postgres.driver import PostgresDriver, conninfo_from_url
from durq._drivers.postgres.pool import DurqPool
from durq.errors import DatabaseUnavailable

from ..waiting import wait_until


@pytest.fixture
def one_connection(pg_url: str) -> Iterator[PostgresDriver]:
    driver = PostgresDriver(pg_url, min_size=1, max_size=1)
    yield driver
    driver.close()


def _pool(driver: PostgresDriver) -> DurqPool:
    pool = driver._get_pool()
    assert isinstance(pool, DurqPool)
    return pool


def _backend_pid(driver: PostgresDriver) -> int:
    with driver.transaction() as ex:
        row = ex.conn.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[attr-defined]
    assert row is not None
    return int(row[0])


def test_a_connection_back_moments_ago_is_handed_out_without_the_check_round_trip(
    one_connection: PostgresDriver,
) -> None:
    first = _backend_pid(one_connection)
    pool = _pool(one_connection)
    checks, skipped = pool.checks, pool.checks_skipped
    assert _backend_pid(one_connection) == first  # the same connection, reused
    assert (pool.checks, pool.checks_skipped) == (checks, skipped + 1)


def test_a_connection_the_server_closed_since_its_last_use_is_replaced_on_checkout(
    one_connection: PostgresDriver, pg_url: str
) -> None:
    pid = _backend_pid(one_connection)
    _terminate(pg_url, pid)
    pool = _pool(one_connection)
    checks = pool.checks
    # Fresh from use, but the server's goodbye is waiting on its socket: the checkout checks
    # it, finds it dead and hands out a new connection, so the statement does not fail.
    replacement = _backend_pid(one_connection)
    assert replacement != pid
    assert pool.checks > checks
    checks = pool.checks
    _backend_pid(one_connection)  # a connection died: every checkout is checked for a while
    assert pool.checks == checks + 1


def test_after_a_connection_comes_back_broken_every_checkout_is_checked(
    one_connection: PostgresDriver, pg_url: str
) -> None:
    with pytest.raises(DatabaseUnavailable), one_connection.transaction() as ex:
        pid = ex.conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[attr-defined]
        _terminate(pg_url, pid)  # dies in use: the next statement fails
        ex.conn.execute("SELECT 1")  # type: ignore[attr-defined]
    pool = _pool(one_connection)
    checks = pool.checks
    replacement = _backend_pid(one_connection)  # checked, and on a new connection
    assert replacement != pid
    assert pool.checks == checks + 1
    _backend_pid(one_connection)  # still distrusted: checked again
    assert pool.checks == checks + 2


def _terminate(pg_url: str, pid: int) -> None:
    """End a backend and wait until it is gone (its socket closed)."""
    with psycopg.connect(conninfo_from_url(pg_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_until(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
                == (0,)
            ),
            what=f"backend {pid} to exit",
        )
