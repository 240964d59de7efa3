"""What the driver tests share: a ``NewJob`` factory, plain SQL beside the driver, and
small steps that each open their own transaction and call one driver operation, so a test
reads as the sequence of operations it checks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

import durq
from durq import states
from durq._drivers import Driver, FinishRequest, NewJob
from durq.types import Artifact, Job


class JobFactory:
    """Builds validated enqueue requests through the public ``App.build``."""

    def __init__(self, app: durq.App) -> None:
        self.app = app

    def __call__(
        self, task: str = "t", args: dict[str, Any] | None = None, **options: Any
    ) -> NewJob:
        return self.app.build(task, args, **options)


class PlainSql:
    """SQL on a connection of its own (never the driver's), ``:name`` parameters on both
    backends; each call commits."""

    def __init__(self, url: str) -> None:
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://") :]
        self.engine = sa.create_engine(url, poolclass=sa.NullPool)

    def rows(self, query: str, **params: Any) -> list[dict[str, Any]]:
        with self.engine.begin() as conn:
            result = conn.execute(sa.text(query), params)
            return [dict(row) for row in result.mappings().all()] if result.returns_rows else []

    def one(self, query: str, **params: Any) -> dict[str, Any]:
        (row,) = self.rows(query, **params)
        return row

    def scalar(self, query: str, **params: Any) -> Any:
        (value,) = self.one(query, **params).values()
        return value

    def close(self) -> None:
        self.engine.dispose()


#: Why PostgreSQL changes some JSON numbers (an xfail reason several modules share).
JSONB_NUMBERS_REASON = (
    "PostgreSQL keeps JSON numbers in jsonb as numeric and prints them without an exponent: "
    "a float Python's json writes as 1e+20 reads back as the int 100000000000000000000, and "
    "1e+300 as an int that is not even equal to it; SQLite keeps the JSON text"
)

#: Two clocks (Python's and the database's) read a few statements apart.
CLOCK_SLACK = timedelta(seconds=2)


def insert(driver: Driver, new: NewJob) -> Job:
    with driver.transaction() as ex:
        return driver.job_insert(ex, new)


def get(driver: Driver, job_id: int) -> Job:
    with driver.read() as ex:
        job = driver.job_get(ex, job_id)
    assert job is not None, f"job {job_id} is missing"
    return job


def claim(
    driver: Driver,
    *,
    queue: str = "default",
    worker: str = "w1",
    limit: int = 10,
    lease: float = 30.0,
) -> list[Job]:
    with driver.transaction() as ex:
        return driver.job_claim(ex, queue=queue, worker_id=worker, limit=limit, lease_seconds=lease)


def claim_one(driver: Driver, *, queue: str = "default", lease: float = 30.0) -> Job:
    (job,) = claim(driver, queue=queue, limit=1, lease=lease)
    return job


def request(
    job: Job,
    change: states.Change,
    *,
    version: int | None = None,
    worker: str = "w1",
    runtime_ms: int | None = 5,
    artifacts: Sequence[Artifact] = (),
) -> FinishRequest:
    return FinishRequest(
        job.id,
        job.claim_version if version is None else version,
        worker,
        change,
        runtime_ms,
        artifacts,
    )


def finish(
    driver: Driver,
    job: Job,
    change: states.Change,
    *,
    version: int | None = None,
    worker: str = "w1",
    runtime_ms: int | None = 5,
    artifacts: Sequence[Artifact] = (),
) -> Job | None:
    req = request(
        job, change, version=version, worker=worker, runtime_ms=runtime_ms, artifacts=artifacts
    )
    with driver.transaction() as ex:
        return driver.job_finish(ex, req)


class About:
    """A stored duration, to the microsecond: SQLite keeps times as float seconds, so two
    times written as ``t`` and ``t + 30`` may read back 29.999999 s apart."""

    def __init__(self, seconds: float) -> None:
        self.expected = timedelta(seconds=seconds)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, timedelta):
            return NotImplemented
        return abs(other - self.expected) <= timedelta(microseconds=1)

    def __hash__(self) -> int:
        return hash(self.expected)

    def __repr__(self) -> str:
        return f"about({self.expected.total_seconds()}s)"


def about(seconds: float) -> About:
    """Equal to a ``timedelta`` of ``seconds`` give or take a microsecond."""
    return About(seconds)


def ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


def near(value: datetime | None, expected: datetime, slack: timedelta = CLOCK_SLACK) -> bool:
    return value is not None and abs(value - expected) <= slack


def set_time(
    sql: PlainSql,
    driver: Driver,
    table: str,
    column: str,
    when: datetime,
    *,
    where: str,
    key: object,
) -> None:
    """Write ``when`` into a timestamp column of the rows whose ``where`` column is ``key``,
    with plain SQL: a test ages a row instead of waiting."""
    sql.rows(
        f"UPDATE {table} SET {column} = :when WHERE {where} = :key",
        when=driver.ts_param(when),
        key=key,
    )
