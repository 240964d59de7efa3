"""Named operations the HTTP service and ``durq keys`` need, over either backend.

API keys, the worker list and the scrape-time metric queries. Each runs named blocks from
the dialect's ``api.sql`` inside a transaction the caller opened; values cross the driver
through the backend's own converters, so the two dialects share this code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .base import Driver
from .sql import Executor

__all__ = [
    "ApiKey",
    "AttemptBucket",
    "attempt_buckets",
    "job_counts",
    "key_bootstrap",
    "key_by_hash",
    "key_disable",
    "key_get",
    "key_insert",
    "key_list",
    "key_touch",
    "notify_queue",
    "ping",
]


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One row of ``durq_api_keys`` without its hash."""

    id: str
    owner: str
    role: str
    created_at: datetime | None
    last_used_at: datetime | None
    disabled_at: datetime | None

    @property
    def disabled(self) -> bool:
        return self.disabled_at is not None

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "id": self.id,
            "owner": self.owner,
            "role": self.role,
            "created_at": ts(self.created_at),
            "last_used_at": ts(self.last_used_at),
            "disabled_at": ts(self.disabled_at),
        }


@dataclass(frozen=True, slots=True)
class AttemptBucket:
    """Stored attempts of one (queue, task, outcome) whose runtime fell in one bucket."""

    queue: str
    task: str
    outcome: str
    bucket: int | None  # index into the duration buckets; None when no runtime was recorded
    count: int
    runtime_ms: int
    retries: int


def _key(backend: Driver, row: Mapping[str, Any]) -> ApiKey:
    return ApiKey(
        id=row["id"],
        owner=row["owner"],
        role=row["role"],
        created_at=backend.ts_out(row["created_at"]),
        last_used_at=backend.ts_out(row["last_used_at"]),
        disabled_at=backend.ts_out(row["disabled_at"]),
    )


def key_insert(
    backend: Driver, ex: Executor, *, key_id: str, owner: str, role: str, key_hash: str
) -> ApiKey:
    return _key_write(backend, ex, "api_key_insert", key_id, owner, role, key_hash)


def key_bootstrap(
    backend: Driver, ex: Executor, *, key_id: str, owner: str, role: str, key_hash: str
) -> ApiKey:
    """Create the key, or re-enable the one with this hash (with this owner and role)."""
    return _key_write(backend, ex, "api_key_bootstrap", key_id, owner, role, key_hash)


def _key_write(
    backend: Driver, ex: Executor, block: str, key_id: str, owner: str, role: str, key_hash: str
) -> ApiKey:
    params = {
        "id": key_id,
        "owner": owner,
        "role": role,
        "key_hash": key_hash,
        "now": backend.now_param(),
    }
    return _key(backend, ex.run(block, params)[0])


def key_by_hash(backend: Driver, ex: Executor, key_hash: str) -> tuple[ApiKey, str] | None:
    """The key stored under ``key_hash`` and the stored hash itself, or ``None``."""
    rows = ex.run("api_key_by_hash", {"key_hash": key_hash})
    if not rows:
        return None
    return _key(backend, rows[0]), str(rows[0]["key_hash"])


def key_touch(backend: Driver, ex: Executor, key_id: str) -> None:
    ex.run("api_key_touch", {"id": key_id, "now": backend.now_param()})


def key_get(backend: Driver, ex: Executor, key_id: str) -> ApiKey | None:
    rows = ex.run("api_key_get", {"id": key_id})
    return _key(backend, rows[0]) if rows else None


def key_list(backend: Driver, ex: Executor, *, after_id: str | None, limit: int) -> list[ApiKey]:
    rows = ex.run("api_key_list", {"after_id": after_id, "limit": limit})
    return [_key(backend, r) for r in rows]


def key_disable(backend: Driver, ex: Executor, key_id: str) -> ApiKey | None:
    rows = ex.run("api_key_disable", {"id": key_id, "now": backend.now_param()})
    return _key(backend, rows[0]) if rows else None


def ping(ex: Executor) -> None:
    ex.run("api_ping")


def notify_queue(backend: Driver, ex: Executor, queue: str) -> None:
    """Wake idle workers of ``queue`` (PostgreSQL NOTIFY; SQLite workers poll)."""
    ex.run("api_notify_queue", {"queue": queue})


def job_counts(ex: Executor) -> list[tuple[str, str, str, int]]:
    """``(queue, task, state, count)`` over every stored job."""
    return [(r["queue"], r["task"], r["state"], int(r["n"])) for r in ex.run("metrics_job_counts")]


def attempt_buckets(ex: Executor) -> list[AttemptBucket]:
    return [
        AttemptBucket(
            queue=r["queue"],
            task=r["task"],
            outcome=r["outcome"],
            bucket=None if r["bucket"] is None else int(r["bucket"]),
            count=int(r["n"]),
            runtime_ms=int(r["runtime_ms"] or 0),
            retries=int(r["retries"] or 0),
        )
        for r in ex.run("metrics_attempts")
    ]
