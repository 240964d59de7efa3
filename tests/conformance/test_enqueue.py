"""Idempotent, transactional and bulk enqueue; bad input refused with nothing written."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._drivers.sqlite.driver import path_from_url


def _count(app: durq.App) -> int:
    return len(app.list_jobs(limit=1000))


def test_idempotency_same_key_same_args_returns_the_original(app: durq.App) -> None:
    first = app.enqueue("resize", {"image_id": 7}, idempotency_key="img-7")
    again = app.enqueue("resize", {"image_id": 7}, idempotency_key="img-7")
    assert again == first and _count(app) == 1
    assert first.idempotency_key == "img-7"
    other_scope = app.enqueue("thumbnail", {"image_id": 7}, idempotency_key="img-7")
    assert other_scope.id != first.id  # the scope defaults to the task


def test_idempotency_same_key_other_args_conflicts_and_writes_nothing(app: durq.App) -> None:
    first = app.enqueue("resize", {"image_id": 7}, idempotency_key="img-7")
    with pytest.raises(durq.IdempotencyConflict) as err:
        app.enqueue("resize", {"image_id": 8}, idempotency_key="img-7")
    assert err.value.existing_job_id == first.id
    assert "img-7" in str(err.value) and "new key" in str(err.value)
    assert _count(app) == 1 and app.get_job(first.id) == first


def test_idempotency_key_expires(app: durq.App) -> None:
    first = app.enqueue("resize", {"image_id": 7}, idempotency_key="k", idempotency_ttl=0.2)
    time.sleep(0.25)  # past the key's lifetime: the point of the test, not a wait for work
    second = app.enqueue("resize", {"image_id": 7}, idempotency_key="k", idempotency_ttl=0.2)
    assert second.id != first.id and _count(app) == 2
    third = app.enqueue("resize", {"image_id": 7}, idempotency_key="k", idempotency_ttl=0.2)
    assert third.id == second.id


def test_idempotency_holds_under_concurrent_enqueue(app: durq.App) -> None:
    ids: list[int] = []
    barrier = threading.Barrier(4)

    def enqueue() -> None:
        barrier.wait()
        ids.append(app.enqueue("charge", {"order": 1}, idempotency_key="order-1").id)

    threads = [threading.Thread(target=enqueue) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(ids) == 4 and len(set(ids)) == 1 and _count(app) == 1


def _sa_engine(url: str) -> sa.Engine:
    if url.startswith("sqlite"):
        return sa.create_engine(f"sqlite:///{path_from_url(url)}")
    return sa.create_engine(
        conninfo_from_url(url).replace("postgresql://", "postgresql+psycopg://")
    )


def test_transactional_enqueue_with_sqlalchemy_connection(app: durq.App, db_url: str) -> None:
    engine = _sa_engine(db_url)
    with engine.connect() as conn:
        trans = conn.begin()
        job = app.enqueue("welcome", {"user": 1}, connection=conn)
        trans.rollback()
    with pytest.raises(durq.JobNotFound):
        app.get_job(job.id)
    with engine.begin() as conn:
        kept = app.enqueue("welcome", {"user": 2}, connection=conn)
        assert conn.in_transaction()  # durq did not commit it
    assert app.get_job(kept.id).args == {"user": 2}
    engine.dispose()


def test_transactional_enqueue_with_sqlalchemy_session(app: durq.App, db_url: str) -> None:
    engine = _sa_engine(db_url)
    with Session(engine) as session:
        job = app.enqueue("welcome", {"user": 3}, connection=session)
        session.rollback()
    with pytest.raises(durq.JobNotFound):
        app.get_job(job.id)
    with Session(engine) as session, session.begin():
        kept = app.enqueue_many(
            [("welcome", {"user": 4}), ("welcome", {"user": 5})], connection=session
        )
    assert [app.get_job(j.id).args["user"] for j in kept] == [4, 5]
    engine.dispose()


def test_transactional_enqueue_with_dbapi_connection(app: durq.App, db_url: str) -> None:
    conn: Any
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(path_from_url(db_url))
    else:
        conn = psycopg.connect(conninfo_from_url(db_url))
    job = app.enqueue("welcome", {"user": 6}, connection=conn, idempotency_key="u6")
    conn.rollback()
    with pytest.raises(durq.JobNotFound):
        app.get_job(job.id)
    kept = app.enqueue("welcome", {"user": 7}, connection=conn)
    conn.commit()
    conn.close()
    assert app.get_job(kept.id).state == "queued"


def test_connection_of_the_other_database_is_refused(app: durq.App, db_url: str) -> None:
    other: Any = object()
    with pytest.raises(durq.ConfigurationError, match="connection="):
        app.enqueue("t", {}, connection=other)


def test_unicode_text_round_trips(app: durq.App) -> None:
    args = {"emoji": "\U0001f600 ok", "escaped": "\\u0000 is only text", "accents": "déjà vu"}
    assert app.get_job(app.enqueue("t", args).id).args == args


def test_enqueue_many_bulk(app: durq.App) -> None:
    jobs = app.enqueue_many(
        [durq.EnqueueRequest("t", {"n": i}, queue="bulk", priority=i % 3) for i in range(500)]
    )
    assert [j.args["n"] for j in jobs] == list(range(500))
    assert {j.queue for j in jobs} == {"bulk"} and _count(app) == 500


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    (
        dict(args={"when": datetime.now(UTC)}),
        "JSON-serialisable.*datetime.*\\['when'\\].*isoformat",
    ),
    (dict(args={"x": float("nan")}), "JSON-serialisable"),
    (dict(args=[1, 2]), "JSON object"),
    (dict(args={"note": "a\x00b"}), r"cannot be stored at args\['note'\]: a NUL"),
    (dict(args={"k": ["\ud800"]}), r"cannot be stored at args\['k'\]\[0\].*surrogate"),
    (dict(queue="bad queue!"), "invalid queue name 'bad queue!'"),
    (dict(queue=""), "invalid queue name"),
    (dict(delay=-5), "delay must be a number of seconds >= 0, got -5"),
    (dict(delay=float("inf")), "delay must be"),
    (dict(max_attempts=0), "max_attempts must be an integer >= 1"),
    (dict(max_attempts="3"), "max_attempts must be an integer"),
    (dict(run_at=datetime(2030, 1, 1)), "timezone-aware"),
    (dict(run_at=datetime.now(UTC), delay=1), "either run_at or delay"),
    (dict(priority="high"), "priority must be an integer"),
    (dict(idempotency_key=""), "idempotency_key must be a non-empty string"),
    (dict(task=" spaced "), "invalid task name"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_INPUT)
def test_bad_input_is_refused_and_nothing_is_written(
    app: durq.App, bad: dict[str, Any], message: str
) -> None:
    options = dict(bad)
    task = options.pop("task", "resize")
    args = options.pop("args", {"image_id": 1})
    with pytest.raises(durq.ValidationError, match=message):
        app.enqueue(task, args, **options)
    with pytest.raises(durq.ValidationError, match="item 1"):
        app.enqueue_many(
            [durq.EnqueueRequest("ok", {}), durq.EnqueueRequest(task, args, **options)]
        )
    assert _count(app) == 0


@pytest.mark.parametrize(("bad", "message"), [(b, m) for b, m in BAD_INPUT if list(b) == ["args"]])
def test_each_items_args_are_checked_when_a_batch_shares_its_task(
    app: durq.App, bad: dict[str, Any], message: str
) -> None:
    # Items of one task share all but their args, so only the first is validated whole.
    with pytest.raises(durq.ValidationError, match=f"item 2: .*{message}"):
        app.enqueue_many(
            [("resize", {"image_id": 1}), ("resize", {"image_id": 2}), ("resize", bad["args"])]
        )
    assert _count(app) == 0


def test_a_batch_of_one_task_stores_each_items_own_args(app: durq.App) -> None:
    ids = app.enqueue_many([("resize", {"image_id": i}) for i in range(300)], return_jobs=False)
    alone = app.enqueue("resize", {"image_id": 300})
    jobs = [app.get_job(i) for i in ids]
    assert [j.args for j in jobs] == [{"image_id": i} for i in range(300)]

    def defaults(job: durq.Job) -> tuple[object, ...]:
        policy = tuple(sorted(job.retry_policy.items()))
        return (job.task, job.queue, job.priority, job.max_attempts, policy)

    assert {defaults(j) for j in jobs} == {defaults(alone)}


def test_unknown_state_filter_is_refused(app: durq.App) -> None:
    with pytest.raises(durq.ValidationError, match=r"unknown state 'done'; use one of: queued"):
        app.list_jobs(state="done")
    with pytest.raises(durq.ValidationError, match="limit"):
        app.list_jobs(limit=0)


def test_unreachable_postgres_names_the_url_without_password() -> None:
    app = durq.App("postgresql://alice:s3cret@127.0.0.1:1/jobs")
    with pytest.raises(durq.DatabaseUnavailable) as err:
        app.get_job(1)
    text = str(err.value)
    assert "postgresql://alice:***@127.0.0.1:1/jobs" in text and "s3cret" not in text
    assert "DURQ_DATABASE_URL" in text


def test_unopenable_sqlite_names_the_path(tmp_path: Any) -> None:
    app = durq.App(f"sqlite:///{tmp_path}/missing/dir/x.db")
    with pytest.raises(durq.DatabaseUnavailable, match=r"missing/dir/x\.db.*folder exists"):
        app.get_job(1)


def test_unmigrated_database_says_run_migrate(tmp_path: Any) -> None:
    app = durq.App(f"sqlite:///{tmp_path}/fresh.db")
    with pytest.raises(durq.SchemaOutOfDate, match="durq migrate"):
        app.enqueue("t", {})
    with pytest.raises(durq.SchemaOutOfDate, match=r"migrations \[1, .*\] are not applied"):
        app.check_schema()
    app.migrate()
    app.check_schema()


def test_get_unknown_job_is_not_found(app: durq.App) -> None:
    with pytest.raises(durq.JobNotFound, match="job 424242 does not exist"):
        app.get_job(424242)
