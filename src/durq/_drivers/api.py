"""Typed queries for the HTTP service and ``durq keys``: API keys, wake-ups, metrics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .rows import RowCodec
from .sql import Executor

__all__ = ["ApiKey", "ApiQueries", "AttemptBucket", "JobArgCount"]


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


@dataclass(frozen=True, slots=True)
class JobArgCount:
    """Stored jobs of one task in one state with one value of an argument."""

    state: str
    label: str | None  # the argument's value as text; None when absent (or not asked)
    count: int
    retries: int  # attempts after the first


class ApiQueries(RowCodec):
    def _api_key(self, row: Mapping[str, Any]) -> ApiKey:
        return ApiKey(
            id=row["id"],
            owner=row["owner"],
            role=row["role"],
            created_at=self.ts_out(row["created_at"]),
            last_used_at=self.ts_out(row["last_used_at"]),
            disabled_at=self.ts_out(row["disabled_at"]),
        )

    def key_insert(
        self, ex: Executor, *, key_id: str, owner: str, role: str, key_hash: str
    ) -> ApiKey:
        return self._key_write(ex, "api_key_insert", key_id, owner, role, key_hash)

    def key_bootstrap(
        self, ex: Executor, *, key_id: str, owner: str, role: str, key_hash: str
    ) -> ApiKey:
        """Create the key, or re-enable the one with this hash (with this owner and role)."""
        return self._key_write(ex, "api_key_bootstrap", key_id, owner, role, key_hash)

    def _key_write(
        self, ex: Executor, block: str, key_id: str, owner: str, role: str, key_hash: str
    ) -> ApiKey:
        params = {
            "id": key_id,
            "owner": owner,
            "role": role,
            "key_hash": key_hash,
            "now": self.now_param(),
        }
        return self._api_key(ex.run(block, params)[0])

    def key_by_hash(self, ex: Executor, key_hash: str) -> tuple[ApiKey, str] | None:
        """The key stored under ``key_hash`` and the stored hash itself, or ``None``."""
        rows = ex.run("api_key_by_hash", {"key_hash": key_hash})
        return (self._api_key(rows[0]), str(rows[0]["key_hash"])) if rows else None

    def key_touch(self, ex: Executor, key_id: str) -> None:
        ex.run("api_key_touch", {"id": key_id, "now": self.now_param()})

    def key_get(self, ex: Executor, key_id: str) -> ApiKey | None:
        rows = ex.run("api_key_get", {"id": key_id})
        return self._api_key(rows[0]) if rows else None

    def key_list(self, ex: Executor, *, after_id: str | None, limit: int) -> list[ApiKey]:
        rows = ex.run("api_key_list", {"after_id": after_id, "limit": limit})
        return [self._api_key(r) for r in rows]

    def key_disable(self, ex: Executor, key_id: str) -> ApiKey | None:
        rows = ex.run("api_key_disable", {"id": key_id, "now": self.now_param()})
        return self._api_key(rows[0]) if rows else None

    def ping(self, ex: Executor) -> None:
        ex.run("api_ping")

    def notify_queue(self, ex: Executor, queue: str) -> None:
        """Wake idle workers of ``queue`` in other processes (a no-op where the database
        has no notifications; those workers poll)."""
        ex.run("api_notify_queue", {"queue": queue})

    def job_counts(self, ex: Executor) -> list[tuple[str, str, str, int]]:
        """``(queue, task, state, count)`` over every stored job."""
        rows = ex.run("metrics_job_counts")
        return [(r["queue"], r["task"], r["state"], int(r["n"])) for r in rows]

    def attempt_buckets(self, ex: Executor) -> list[AttemptBucket]:
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

    def job_arg_counts(self, ex: Executor, task: str, arg: str) -> list[JobArgCount]:
        """``task``'s jobs by state and by the value of argument ``arg`` ('' for none)."""
        return [
            JobArgCount(
                state=r["state"],
                label=None if r["label"] is None else str(r["label"]),
                count=int(r["n"]),
                retries=int(r["retries"] or 0),
            )
            for r in ex.run("metrics_job_args", {"task": task, "arg": arg})
        ]
