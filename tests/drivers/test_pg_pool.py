"""The PostgreSQL pool's checkout check: skipped for a connection back moments ago in good
order (it costs a round trip), made again on every checkout once a connection came back
broken, so a restarted server is found on checkout."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from durq._drivers.postgres.driver import PostgresDriver, conninfo_from_url
from durq._drivers.postgres.pool import DurqPool
from durq.errors import DatabaseUnavailable


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


def test_after_a_connection_comes_back_broken_every_checkout_is_checked(
    one_connection: PostgresDriver, pg_url: str
) -> None:
    pid = _backend_pid(one_connection)
    with psycopg.connect(conninfo_from_url(pg_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # Fresh from use, the dead connection skips the check: its statement fails with the
    # transient error every worker component retries, and it goes back broken.
    with pytest.raises(DatabaseUnavailable):
        _backend_pid(one_connection)
    pool = _pool(one_connection)
    checks = pool.checks
    replacement = _backend_pid(one_connection)  # checked, and on a new connection
    assert replacement != pid
    assert pool.checks == checks + 1
    _backend_pid(one_connection)  # still distrusted: checked again
    assert pool.checks == checks + 2
