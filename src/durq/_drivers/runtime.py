"""Typed queries for the worker runtime: the worker registry, leader leases, pruning."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..types import JobState, WorkerInfo
from .rows import RowCodec
from .sql import Executor

__all__ = ["RuntimeQueries"]


class RuntimeQueries(RowCodec):
    def worker_register(
        self,
        ex: Executor,
        *,
        worker_id: str,
        hostname: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        heartbeat_seconds: float,
    ) -> None:
        params = {
            "id": worker_id,
            "hostname": hostname,
            "pid": pid,
            "queues": json.dumps(list(queues)),
            "concurrency": concurrency,
            "heartbeat_seconds": heartbeat_seconds,
            "now": self.now_param(),
        }
        ex.run("worker_register", params)

    def worker_heartbeat(self, ex: Executor, worker_id: str, processed: int) -> None:
        params = {"id": worker_id, "processed": processed, "now": self.now_param()}
        ex.run("worker_heartbeat", params)

    def worker_stop(self, ex: Executor, worker_id: str, processed: int) -> None:
        ex.run("worker_stop", {"id": worker_id, "processed": processed, "now": self.now_param()})

    def worker_list(self, ex: Executor, *, include_stopped: bool, limit: int) -> list[WorkerInfo]:
        params = {"include_stopped": include_stopped, "limit": limit, "now": self.now_param()}
        return [self.worker_from_row(r) for r in ex.run("worker_list", params)]

    def worker_prune(self, ex: Executor, older_than: float) -> None:
        ex.run("worker_prune", {"older_than": older_than, "now": self.now_param()})

    def leader_acquire(self, ex: Executor, name: str, holder: str, ttl: float) -> bool:
        """Take or renew the ``name`` role for ``ttl`` seconds; True if ``holder`` leads."""
        params = {"name": name, "holder": holder, "ttl": ttl, "now": self.now_param()}
        rows = ex.run("leader_acquire", params)
        return bool(rows) and rows[0]["holder"] == holder

    def leader_release(self, ex: Executor, name: str, holder: str) -> None:
        ex.run("leader_release", {"name": name, "holder": holder})

    def leader_get(self, ex: Executor, name: str) -> str | None:
        rows = ex.run("leader_get", {"name": name, "now": self.now_param()})
        return str(rows[0]["holder"]) if rows else None

    def job_prune(self, ex: Executor, state: JobState, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` ``state`` jobs finished more than ``older_than`` seconds
        ago, leaving a tombstone for each so their ids answer "gone". Returns the count."""
        params = {
            "state": str(state),
            "older_than": older_than,
            "limit": limit,
            "now": self.now_param(),
        }
        ids = [int(r["id"]) for r in ex.run("job_prune_ids", params)]
        if ids:
            ex.run("tombstone_insert_many", {"ids": self.list_param(ids), "now": self.now_param()})
            ex.run("job_delete_many", {"ids": self.list_param(ids)})
        return len(ids)

    def tombstone_prune(self, ex: Executor, older_than: float, limit: int) -> None:
        params = {"older_than": older_than, "limit": limit, "now": self.now_param()}
        ex.run("tombstone_prune", params)

    def idempotency_prune(self, ex: Executor, limit: int) -> None:
        ex.run("idem_prune", {"limit": limit, "now": self.now_param()})
