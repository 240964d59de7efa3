"""Named SQL blocks and the executors that run them on the kinds of connection durq meets.

Every ``.sql`` file in a dialect folder holds blocks introduced by ``-- name: <block>``.
Blocks use ``:param`` placeholders; ``{job_columns}`` expands to the block of that name.
Nothing is ever assembled from user input: parameters are always bound.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Executor", "Queries", "load_queries"]

_NAME_RE = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_PARAM_RE = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_MACRO_RE = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Queries:
    """The named blocks of one dialect, in ``:name`` form and in psycopg's ``%(name)s`` form."""

    named: Mapping[str, str]
    pyformat: Mapping[str, str]

    def __getitem__(self, name: str) -> str:
        return self.named[name]


def load_queries(*directories: Path) -> Queries:
    """Every named block of ``directories`` (a dialect's own and the shared ones); a name
    defined twice is an error, so a dialect never silently shadows a shared block."""
    blocks: dict[str, str] = {}
    for path in sorted(p for directory in directories for p in directory.glob("*.sql")):
        text = path.read_text()
        matches = list(_NAME_RE.finditer(text))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            name = match.group(1)
            if name in blocks:
                raise RuntimeError(f"SQL block {name!r} is defined twice (in {path.name})")
            blocks[name] = text[match.end() : end].strip().rstrip(";")
    expanded = {name: _expand(sql, blocks) for name, sql in blocks.items()}
    pyformat = {
        name: _PARAM_RE.sub(r"%(\1)s", sql.replace("%", "%%")) for name, sql in expanded.items()
    }
    return Queries(expanded, pyformat)


def _expand(sql: str, blocks: Mapping[str, str]) -> str:
    return _MACRO_RE.sub(lambda m: blocks[m.group(1)], sql)


class Executor(Protocol):
    """Runs one named block in the current transaction and returns its rows as dicts."""

    dialect: str

    def run(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Sequence[Any]]:
        """Like :meth:`run`, but each row as a sequence in the block's column order (the
        hot paths skip building a dict per row)."""
        ...


class SqliteExecutor:
    """A ``sqlite3`` connection: ``:name`` placeholders natively."""

    dialect = "sqlite"

    def __init__(self, conn: Any, queries: Queries) -> None:
        self.conn = conn
        self.queries = queries

    def run(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        cur = self.conn.execute(self.queries.named[name], params or {})
        if cur.description is None:
            return []
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Sequence[Any]]:
        cur = self.conn.execute(self.queries.named[name], params or {})
        return cur.fetchall() if cur.description is not None else []


class SqlAlchemyExecutor:
    """A SQLAlchemy ``Connection``: ``text()`` binds ``:name`` for whatever driver it uses."""

    def __init__(self, conn: Any, queries: Queries, dialect: str) -> None:
        self.conn = conn
        self.queries = queries
        self.dialect = dialect

    def run(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        from sqlalchemy import text

        sql = self.queries.named[name]
        used = set(_PARAM_RE.findall(sql))
        bound = {k: v for k, v in (params or {}).items() if k in used}
        result = self.conn.execute(text(sql), bound)
        if not result.returns_rows:
            return []
        return [dict(row) for row in result.mappings().all()]

    def values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Sequence[Any]]:
        return [tuple(row.values()) for row in self.run(name, params)]


def split_statements(script: str) -> list[str]:
    """Split a migration file into statements (statements end with ``;`` at a line's end)."""
    statements: list[str] = []
    current: list[str] = []
    for line in script.splitlines():
        if line.strip().startswith("--") and not current:
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip()
            if statement.strip(";").strip():
                statements.append(statement)
            current = []
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return statements


def migrations_in(directory: Path) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for each ``NNNN_name.sql`` in ``directory``, in order."""
    found = []
    for path in sorted(directory.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        version = int(path.name[:4])
        found.append((version, path.stem[5:], path.read_text()))
    return found
