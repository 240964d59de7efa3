"""Typed job queries: one method per named SQL block, no policy.

Each method runs inside the caller's transaction (``ex``) and reports what the database
said: a fenced write that matched no row returns ``None``; deciding what that means
(a lost lease, an invalid stage, a conflict) is the engine's job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import LeaseLost
from ..types import Artifact, Attempt, Finished, Job
from .base import FinishRequest, NewJob
from .rows import RowCodec, epoch
from .sql import Executor

__all__ = ["JobQueries", "claim_order"]


def claim_order(job: Job) -> tuple[int, datetime, int]:
    """The order claims pick jobs in: priority (lower first), then run_at, then id."""
    return (job.priority, job.run_at, job.id)


class JobQueries(RowCodec):
    # ---- enqueue ---------------------------------------------------------------------

    def job_insert(self, ex: Executor, new: NewJob, *, notify: bool = True) -> Job:
        """Insert one job (no idempotency bookkeeping; see ``durq._engine.enqueue``).
        ``notify=False``: send no wake-up with it (where the database has notifications;
        the caller sends one after commit)."""
        row = ex.run("job_insert" if notify else "job_insert_quiet", self._insert_params(new))[0]
        created_at = self.ts_out(row["created_at"]) or epoch()
        return self.job_from_new(
            new, row["id"], self.ts_out(row["run_at"]) or created_at, created_at
        )

    def job_insert_many(self, ex: Executor, jobs: Sequence[NewJob]) -> list[Job]:
        """Insert many jobs without idempotency keys (dialects override with one statement)."""
        return [self.job_insert(ex, new) for new in jobs]

    def job_insert_many_ids(self, ex: Executor, jobs: Sequence[NewJob]) -> list[int]:
        """``job_insert_many`` answering only the new ids, in order (no ``Job`` to build)."""
        return [job.id for job in self.job_insert_many(ex, jobs)]

    def _insert_params(self, new: NewJob) -> dict[str, Any]:
        return {
            "queue": new.queue,
            "task": new.task,
            "args": new.args_json,
            "priority": new.priority,
            "run_at": self.ts_param(new.run_at),
            "delay": new.delay,
            "max_attempts": new.max_attempts,
            "retry_policy": new.retry_policy_json,
            "created_by": new.created_by,
            "idempotency_key": new.idempotency_key,
            "breaker_key": new.breaker_key,
            "concurrency_key": new.concurrency_key,
            "trace_context": new.trace_context,
            "webhook_url": new.webhook_url,
            "now": self.now_param(),
        }

    def job_trace_context(self, ex: Executor, ids: Sequence[int]) -> dict[int, str]:
        """``{job_id: traceparent}`` for those of ``ids`` enqueued under a trace."""
        if not ids:
            return {}
        rows = ex.run("job_trace_context", {"ids": self.list_param(list(ids))})
        return {int(r["id"]): r["trace_context"] for r in rows}

    def job_delete(self, ex: Executor, job_id: int) -> None:
        # An idempotency loser's row goes, and with it the event its insert wrote.
        ex.run("job_delete", {"id": job_id})
        ex.run("outbox_forget_job", {"id": job_id})

    def idem_get(self, ex: Executor, scope: str, key: str) -> Mapping[str, Any] | None:
        """``{job_id, args_hash, expired}`` for the key, or None."""
        rows = ex.run("idem_get", {"scope": scope, "key": key, "now": self.now_param()})
        if not rows:
            return None
        return {**rows[0], "expired": bool(rows[0]["expired"])}  # SQLite answers 0/1

    def idem_delete(self, ex: Executor, scope: str, key: str) -> None:
        ex.run("idem_delete", {"scope": scope, "key": key, "now": self.now_param()})

    def idem_insert(
        self, ex: Executor, *, scope: str, key: str, args_hash: str, job_id: int, ttl: float
    ) -> bool:
        """Record the key; False if another transaction holds it already."""
        params = {
            "scope": scope,
            "key": key,
            "args_hash": args_hash,
            "job_id": job_id,
            "ttl": ttl,
            "now": self.now_param(),
        }
        return bool(ex.run("idem_insert", params))

    # ---- reads -----------------------------------------------------------------------

    def job_get(self, ex: Executor, job_id: int) -> Job | None:
        rows = ex.run("job_get", {"id": job_id})
        return self.job_from_row(rows[0]) if rows else None

    def tombstone_get(self, ex: Executor, job_id: int) -> bool:
        """True if the job existed and was pruned."""
        return bool(ex.run("tombstone_get", {"id": job_id}))

    def tombstone_owner(self, ex: Executor, job_id: int) -> str | None:
        """The ``created_by`` of a pruned job (None: unknown owner, or no tombstone)."""
        rows = ex.run("tombstone_owner", {"id": job_id})
        return str(rows[0]["created_by"]) if rows and rows[0]["created_by"] is not None else None

    def job_list(
        self,
        ex: Executor,
        *,
        states_: Sequence[str] | None,
        queue: str | None,
        task: str | None,
        created_by: str | None,
        created_after: datetime | None,
        created_before: datetime | None,
        before_id: int | None,
        limit: int,
    ) -> list[Job]:
        params = self._filter_params(
            states_, queue, task, created_by, created_after, created_before, before_id
        )
        rows = ex.run("job_list", params | {"limit": limit})
        return [self.job_from_row(r) for r in rows]

    def job_count(
        self,
        ex: Executor,
        *,
        states_: Sequence[str] | None,
        queue: str | None,
        task: str | None,
        created_by: str | None,
        created_after: datetime | None,
        created_before: datetime | None,
    ) -> int:
        """How many jobs ``job_list`` would find with these filters and no page limit."""
        params = self._filter_params(
            states_, queue, task, created_by, created_after, created_before, None
        )
        return int(ex.run("job_count", params)[0]["n"])

    def _filter_params(
        self,
        states_: Sequence[str] | None,
        queue: str | None,
        task: str | None,
        created_by: str | None,
        created_after: datetime | None,
        created_before: datetime | None,
        before_id: int | None,
    ) -> dict[str, Any]:
        return {
            "states": self.list_param(states_),
            "queue": queue,
            "task": task,
            "created_by": created_by,
            "created_after": self.ts_param(created_after),
            "created_before": self.ts_param(created_before),
            "before_id": before_id,
        }

    def attempt_list(self, ex: Executor, job_id: int) -> list[Attempt]:
        return [self.attempt_from_row(r) for r in ex.run("attempt_list", {"job_id": job_id})]

    def attempt_outcome(self, ex: Executor, job_id: int, claim_version: int) -> str | None:
        """The outcome recorded for the claim ``claim_version`` of a job (None: none yet).
        One record per claim: whoever wrote it was the only one allowed to."""
        rows = ex.run("attempt_outcome", {"job_id": job_id, "claim_version": claim_version})
        return str(rows[0]["outcome"]) if rows else None

    def artifact_list(self, ex: Executor, job_id: int) -> list[Artifact]:
        return [self.artifact_from_row(r) for r in ex.run("artifact_list", {"job_id": job_id})]

    def job_next_due(self, ex: Executor, queues: Sequence[str]) -> float | None:
        """Seconds until the next scheduled job of ``queues`` comes due, or None."""
        rows = ex.run(
            "job_next_due", {"queues": self.list_param(list(queues)), "now": self.now_param()}
        )
        wait = rows[0]["wait_s"] if rows else None
        return None if wait is None else max(0.0, float(wait))

    # ---- the lease: claim, heartbeat, stage, finish (every write fenced) -------------

    def job_claim(
        self, ex: Executor, *, queue: str, worker_id: str, limit: int, lease_seconds: float
    ) -> list[Job]:
        """Claim up to ``limit`` ready jobs of one queue: priority, run_at, id order."""
        params = self._claim_params(queue, worker_id, limit, lease_seconds)
        return self._claimed_jobs(ex.values("job_claim", params))

    def _claim_params(
        self, queue: str, worker_id: str, limit: int, lease_seconds: float
    ) -> dict[str, Any]:
        """The parameters of ``job_claim`` (threaded and event-loop claims alike)."""
        return {
            "queue": queue,
            "worker_id": worker_id,
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": self.now_param(),
        }

    def _claimed_jobs(self, rows: Sequence[Sequence[Any]]) -> list[Job]:
        """The ``Job`` of each row ``job_claim`` returned, in claim order."""
        jobs = list(map(self.job_from_values, rows))
        # RETURNING comes back in the order the UPDATE visited the rows, not the pick order.
        jobs.sort(key=claim_order)
        return jobs

    def job_claim_id(
        self, ex: Executor, job_id: int, *, worker_id: str, lease_seconds: float
    ) -> Job | None:
        params = {
            "id": job_id,
            "worker_id": worker_id,
            "lease_seconds": lease_seconds,
            "now": self.now_param(),
        }
        rows = ex.run("job_claim_id", params)
        return self.job_from_row(rows[0]) if rows else None

    def job_heartbeat(
        self, ex: Executor, job_id: int, claim_version: int, lease_seconds: float
    ) -> bool | None:
        """Extend one lease: ``cancel_requested``, or None if the lease is not held."""
        params = {
            "id": job_id,
            "claim_version": claim_version,
            "lease_seconds": lease_seconds,
            "now": self.now_param(),
        }
        rows = ex.run("job_heartbeat", params)
        return bool(rows[0]["cancel_requested"]) if rows else None

    def job_heartbeat_many(
        self, ex: Executor, held: Sequence[tuple[int, int]], lease_seconds: float
    ) -> dict[int, bool]:
        """Extend many leases: ``{job_id: cancel_requested}`` for those still held."""
        out: dict[int, bool] = {}
        for job_id, version in held:
            cancel = self.job_heartbeat(ex, job_id, version, lease_seconds)
            if cancel is not None:
                out[job_id] = cancel
        return out

    def job_set_stage(
        self,
        ex: Executor,
        *,
        job_id: int,
        claim_version: int,
        stage: str,
        expected_stage: str | None,
        lease_seconds: float,
    ) -> bool | None:
        """Move a held job from ``expected_stage`` to ``stage``: ``cancel_requested``, or
        None if the job is not held at that version and stage."""
        params = {
            "id": job_id,
            "claim_version": claim_version,
            "stage": stage,
            "expected_stage": expected_stage,
            "lease_seconds": lease_seconds,
            "now": self.now_param(),
        }
        rows = ex.run("job_set_stage", params)
        return bool(rows[0]["cancel_requested"]) if rows else None

    def job_finish(self, ex: Executor, req: FinishRequest) -> Job | None:
        """Write one outcome (and, on success, its artifacts) if the lease is still held."""
        change = req.change
        params = {
            "id": req.job_id,
            "claim_version": req.claim_version,
            "to_state": str(change.to_state),
            "refund": 1 if change.refund_attempt else 0,
            "bump": 1 if change.bump_version else 0,
            "delay": change.delay,
            "error_code": change.error_code,
            "error_message": change.error_message,
            "result": None if change.result is None else json.dumps(change.result),
            "worker_id": req.worker_id,
            "runtime_ms": req.runtime_ms,
            "outcome": change.attempt_outcome,
            "traceback": req.traceback,
            "now": self.now_param(),
        }
        rows = ex.run("job_finish", params)
        if not rows:
            return None
        job = self.job_from_row(rows[0])
        self._after_finish(ex, job, req, params)
        if job.state == "succeeded":
            for artifact in req.artifacts:
                self.artifact_insert(ex, job.id, artifact)
        return job

    def _after_finish(
        self, ex: Executor, job: Job, req: FinishRequest, params: Mapping[str, Any]
    ) -> None:
        """Dialects that cannot write the attempt record in the finish statement do it here
        (for an outcome but success: a succeeded attempt is stored on the job row)."""

    def artifact_insert(self, ex: Executor, job_id: int, artifact: Artifact) -> None:
        params = {
            "job_id": job_id,
            "artifact_type": artifact.artifact_type,
            "ref": artifact.ref,
            "payload": json.dumps(artifact.payload),
            "now": self.now_param(),
        }
        ex.run("artifact_insert", params)

    def job_finish_many(
        self, ex: Executor, reqs: Sequence[FinishRequest]
    ) -> list[Finished | LeaseLost]:
        """Many fenced outcome writes in one transaction; a lost lease is reported per job."""
        out: list[Finished | LeaseLost] = []
        for req in reqs:
            job = self.job_finish(ex, req)
            out.append(Finished.of(job) if job else LeaseLost(req.job_id, req.claim_version))
        return out

    def finish_batch(self, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
        """A batch of outcomes in a transaction of its own."""
        with self.transaction() as ex:
            return self.job_finish_many(ex, reqs)

    def job_expired(self, ex: Executor, limit: int) -> list[Job]:
        rows = ex.run("job_expired", {"limit": limit, "now": self.now_param()})
        return [self.job_from_row(r) for r in rows]

    # ---- operator actions ------------------------------------------------------------

    def job_cancel_ready(self, ex: Executor, job_id: int, from_states: Sequence[str]) -> Job | None:
        params = {
            "id": job_id,
            "from_states": self.list_param(from_states),
            "now": self.now_param(),
        }
        rows = ex.run("job_cancel_ready", params)
        return self.job_from_row(rows[0]) if rows else None

    def job_cancel_running(self, ex: Executor, job_id: int) -> Job | None:
        rows = ex.run("job_cancel_running", {"id": job_id, "now": self.now_param()})
        return self.job_from_row(rows[0]) if rows else None

    def job_requeue(self, ex: Executor, job_id: int, from_states: Sequence[str]) -> Job | None:
        """Back to queued from one of ``from_states``. A succeeded job's attempt, stored on
        its row, is stored as a record of its own first (same statement or transaction)."""
        params = {
            "id": job_id,
            "from_states": self.list_param(from_states),
            "now": self.now_param(),
        }
        self._before_requeue(ex, params)
        rows = ex.run("job_requeue", params)
        return self.job_from_row(rows[0]) if rows else None

    def _before_requeue(self, ex: Executor, params: Mapping[str, Any]) -> None:
        """Dialects whose job_requeue cannot store the succeeded attempt's record do it here."""

    # ---- queues ----------------------------------------------------------------------

    def queue_set_paused(self, ex: Executor, name: str, paused: bool) -> None:
        ex.run("queue_set_paused", {"name": name, "paused": paused, "now": self.now_param()})

    def queue_counts(self, ex: Executor) -> list[tuple[str, str, int]]:
        """``(queue, state, count)`` over every stored job."""
        return [(r["queue"], r["state"], int(r["n"])) for r in ex.run("queue_counts", {})]

    def queue_owner_counts(self, ex: Executor, owner: str) -> list[tuple[str, str, int, int]]:
        """``(queue, state, count, ready now)`` over the jobs ``owner`` created."""
        rows = ex.run("queue_owner_counts", {"owner": owner, "now": self.now_param()})
        return [(r["queue"], r["state"], int(r["n"]), int(r["ready"] or 0)) for r in rows]

    def queue_list(self, ex: Executor) -> list[tuple[str, bool]]:
        """``(queue, paused)`` for every queue with a row of its own."""
        return [(r["name"], bool(r["paused"])) for r in ex.run("queue_list", {})]

    def queue_ready_ages(self, ex: Executor) -> list[tuple[str, int, float, float]]:
        """``(queue, ready, oldest_age_s, p95_age_s)`` over jobs ready to run now."""
        rows = ex.run("queue_ready_ages", {"now": self.now_param()})
        return [
            (r["queue"], int(r["ready"]), float(r["oldest_age"]), float(r["p95_age"])) for r in rows
        ]
