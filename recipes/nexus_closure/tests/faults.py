"""Real faults for the failure paths: a trigger that makes the database refuse a write.
Nothing is mocked; the code under test meets the same error a real outage would raise."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine

__all__ = ["database_refuses"]


@contextmanager
def database_refuses(
    engine: Engine, table: str, operation: str, *, when_new_state: str | None = None
) -> Iterator[None]:
    """While inside, ``operation`` (INSERT or UPDATE) on ``table`` fails; with
    ``when_new_state`` only writes that set ``state`` to that value fail."""
    name = f"refuse_{operation.lower()}_{table}"
    message = f"fault injected by the test: {operation} on {table} refused"
    sqlite = engine.dialect.name == "sqlite"
    when = f"WHEN (NEW.state = '{when_new_state}')" if when_new_state else ""
    with engine.begin() as conn:
        if sqlite:
            conn.exec_driver_sql(
                f"CREATE TRIGGER {name} BEFORE {operation} ON {table} {when} "
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION '{message}'; END $$"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER {name} BEFORE {operation} ON {table} FOR EACH ROW {when} "
                f"EXECUTE FUNCTION {name}()"
            )
    try:
        yield
    finally:
        with engine.begin() as conn:
            if sqlite:
                conn.exec_driver_sql(f"DROP TRIGGER {name}")
            else:
                conn.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
                conn.exec_driver_sql(f"DROP FUNCTION {name}()")
