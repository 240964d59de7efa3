"""The recipes' tests use durq's own fixtures: one real database per test, SQLite in a
temp dir or PostgreSQL cloned from a migrated template (test ids name the backend)."""

from tests.conftest import (  # noqa: F401 - fixtures are found by name
    app,
    db_url,
    make_app,
    pg_admin_url,
    pg_template,
    pg_url,
    sqlite_url,
)
