"""The backend seam: named operations over SQL, with capability flags.

The flow of each operation (idempotent enqueue, fenced finish, reclaim, …) is written once
here; the two dialects differ only in their ``.sql`` files and in how values cross the
driver (times, JSON, lists), which :class:`Driver` subclasses supply.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import states
from ..errors import InvalidStage, JobGone, JobNotFound, LeaseLost
from ..retry import policy_from_dict
from ..types import Artifact, Attempt, Finished, Job, JobState, WorkerInfo
from .sql import Executor, Queries, SqlAlchemyExecutor, load_queries, migrations_in

__all__ = ["Driver", "Capabilities", "ClaimedJob", "FinishRequest", "NewJob"]


@dataclass(frozen=True)
class Capabilities:
    listen_notify: bool
    skip_locked: bool
    bulk_insert: bool
    concurrent_writers: bool


@dataclass(frozen=True, slots=True)
class NewJob:
    """A validated enqueue request (see ``durq.app``), ready to insert."""

    queue: str
    task: str
    args_json: str
    priority: int
    run_at: datetime | None
    delay: float
    max_attempts: int
    retry_policy_json: str
    created_by: str | None
    idempotency_scope: str | None
    idempotency_key: str | None
    request_hash: str
    idempotency_ttl: float


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    job: Job


@dataclass(frozen=True, slots=True)
class FinishRequest:
    """One fenced outcome write for a job this worker holds at ``claim_version``."""

    job_id: int
    claim_version: int
    worker_id: str | None
    change: states.Change
    runtime_ms: int | None
    artifacts: Sequence[Artifact] = ()


class Driver(ABC):
    dialect: str
    capabilities: Capabilities
    queries: Queries
    folder: Path

    def __init__(self, url: str) -> None:
        self.url = url
        self.queries = load_queries(self.folder)

    # ---- connections (dialect) -----------------------------------------------------------

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Executor]:
        """A write transaction on a connection durq owns; commits on success."""

    @abstractmethod
    def read(self) -> AbstractContextManager[Executor]:
        """A connection for reads."""

    def autocommit(self) -> AbstractContextManager[Executor]:
        """A connection on which each statement commits by itself, for single-statement
        writes; dialects where that saves nothing use a transaction."""
        return self.transaction()

    @abstractmethod
    def foreign(self, connection: Any) -> Executor:
        """An executor over the caller's own connection; durq never commits it."""

    @abstractmethod
    def close(self) -> None: ...

    # ---- values across the driver (dialect) ----------------------------------------------

    @abstractmethod
    def now_param(self) -> Any:
        """The ``:now`` parameter (SQLite binds Python's clock; PostgreSQL ignores it)."""

    @abstractmethod
    def list_param(self, values: Sequence[Any] | None) -> Any: ...

    @abstractmethod
    def ts_param(self, value: datetime | None) -> Any: ...

    @abstractmethod
    def ts_out(self, value: Any) -> datetime | None: ...

    @abstractmethod
    def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied."""

    @abstractmethod
    def applied_migrations(self) -> list[int]: ...

    def migration_sql(self) -> str:
        return "\n\n".join(sql for _, _, sql in migrations_in(self.folder / "migrations"))

    def known_migrations(self) -> list[int]:
        return [v for v, _, _ in migrations_in(self.folder / "migrations")]

    def foreign_executor(self, connection: Any, dialect: str) -> Executor:
        """SQLAlchemy Connection/Session → text(); else a DB-API connection of the dialect."""
        if hasattr(connection, "execute") and hasattr(connection, "get_bind"):  # Session
            connection = connection.connection()
        if type(connection).__module__.startswith("sqlalchemy"):
            return SqlAlchemyExecutor(connection, self.queries, dialect)
        return self.foreign(connection)

    # ---- rows → types ---------------------------------------------------------------------

    def job_from_row(self, row: Mapping[str, Any]) -> Job:
        return self.job_from_values([row[name] for name in JOB_FIELDS])

    def job_from_values(self, v: Sequence[Any]) -> Job:
        """A ``Job`` from one row of ``{job_columns}``, whose order is ``Job``'s own.

        On the claim path for every job: positional, and no conversions the drivers already
        made (integers come back as int from every driver durq speaks)."""
        ts = self.ts_out
        return Job(
            v[0],
            v[1],
            v[2],
            _json_in(v[3]) or {},
            _STATES[v[4]],
            v[5],
            v[6],
            v[7],
            v[8],
            v[9],
            v[10],
            ts(v[11]) or _epoch(),
            ts(v[12]) or _epoch(),
            ts(v[13]) or _epoch(),
            ts(v[14]),
            ts(v[15]),
            ts(v[16]),
            ts(v[17]),
            v[18],
            v[19],
            _json_in(v[20]),
            _json_in(v[21]) or {},
            bool(v[22]),
            v[23],
            v[24],
        )

    def job_from_new(
        self,
        new: NewJob,
        job_id: int,
        run_at: datetime,
        created_at: datetime,
        policies: dict[str, dict[str, Any]] | None = None,
    ) -> Job:
        """The ``Job`` a just-inserted ``new`` became: only the id and the database's clock
        come back from the insert. ``policies`` caches decoded retry policies per batch."""
        policy = policies.get(new.retry_policy_json) if policies is not None else None
        if policy is None:
            policy = json.loads(new.retry_policy_json)
            if policies is not None:
                policies[new.retry_policy_json] = policy
        return Job(
            id=job_id,
            queue=new.queue,
            task=new.task,
            args=json.loads(new.args_json),
            state=JobState.QUEUED,
            stage=None,
            priority=new.priority,
            attempt=0,
            max_attempts=new.max_attempts,
            claim_version=0,
            worker_id=None,
            run_at=run_at,
            created_at=created_at,
            updated_at=created_at,
            retry_policy=dict(policy),
            created_by=new.created_by,
            idempotency_key=new.idempotency_key,
        )

    def finished_from_row(self, row: Mapping[str, Any]) -> Finished:
        return Finished(
            row["id"],
            _STATES[row["state"]],
            self.ts_out(row["run_at"]) or _epoch(),
            row["last_error_code"],
            row["last_error"],
        )

    # ---- enqueue ---------------------------------------------------------------------------

    def job_insert(self, ex: Executor, new: NewJob) -> tuple[Job, bool]:
        """Insert one job; with an idempotency key, return the original instead.

        Returns ``(job, created)``. Raises ``IdempotencyConflict`` when the key was used
        with a different request. Runs inside ``ex``'s transaction and never ends it.
        """
        from ..errors import IdempotencyConflict

        now = self.now_param()
        if new.idempotency_key is not None:
            scope = new.idempotency_scope or new.task
            key = {"scope": scope, "key": new.idempotency_key, "now": now}
            rows = ex.run("idem_get", key)
            if rows and not rows[0]["expired"]:
                return self._idempotent_hit(ex, new, scope, rows[0]), False
            if rows:
                ex.run("idem_delete", key)
        row = ex.run("job_insert", self._insert_params(new, now))[0]
        created_at = self.ts_out(row["created_at"]) or _epoch()
        job = self.job_from_new(
            new, row["id"], self.ts_out(row["run_at"]) or created_at, created_at
        )
        if new.idempotency_key is None:
            return job, True
        scope = new.idempotency_scope or new.task
        won = ex.run(
            "idem_insert",
            {
                "scope": scope,
                "key": new.idempotency_key,
                "args_hash": new.request_hash,
                "job_id": job.id,
                "ttl": new.idempotency_ttl,
                "now": now,
            },
        )
        if won:
            return job, True
        # A concurrent enqueue committed the same key first: undo our row, answer with theirs.
        ex.run("job_delete", {"id": job.id})
        rows = ex.run("idem_get", {"scope": scope, "key": new.idempotency_key, "now": now})
        if not rows:  # pragma: no cover - the winner's row vanished between two statements
            raise IdempotencyConflict(scope, new.idempotency_key, -1)
        return self._idempotent_hit(ex, new, scope, rows[0]), False

    def _idempotent_hit(self, ex: Executor, new: NewJob, scope: str, row: Mapping[str, Any]) -> Job:
        from ..errors import IdempotencyConflict

        assert new.idempotency_key is not None
        if row["args_hash"] != new.request_hash:
            raise IdempotencyConflict(scope, new.idempotency_key, int(row["job_id"]))
        found = ex.run("job_get", {"id": row["job_id"]})
        if not found:
            raise JobGone(int(row["job_id"]))
        return self.job_from_row(found[0])

    def _insert_params(self, new: NewJob, now: Any) -> dict[str, Any]:
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
            "now": now,
        }

    def job_insert_many(self, ex: Executor, jobs: Sequence[NewJob]) -> list[Job]:
        """Insert many jobs without idempotency keys (the bulk path)."""
        return [self.job_insert(ex, new)[0] for new in jobs]

    # ---- reads -----------------------------------------------------------------------------

    def job_get(self, ex: Executor, job_id: int) -> Job:
        rows = ex.run("job_get", {"id": job_id})
        if rows:
            return self.job_from_row(rows[0])
        if ex.run("tombstone_get", {"id": job_id}):
            raise JobGone(job_id)
        raise JobNotFound(job_id)

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
        rows = ex.run(
            "job_list",
            {
                "states": self.list_param(states_),
                "queue": queue,
                "task": task,
                "created_by": created_by,
                "created_after": self.ts_param(created_after),
                "created_before": self.ts_param(created_before),
                "before_id": before_id,
                "limit": limit,
            },
        )
        return [self.job_from_row(r) for r in rows]

    def attempt_list(self, ex: Executor, job_id: int) -> list[Attempt]:
        return [
            Attempt(
                job_id=int(r["job_id"]),
                attempt=int(r["attempt"]),
                claim_version=int(r["claim_version"]),
                worker_id=r["worker_id"],
                started_at=self.ts_out(r["started_at"]),
                finished_at=self.ts_out(r["finished_at"]) or _epoch(),
                runtime_ms=r["runtime_ms"],
                outcome=r["outcome"],
                error_code=r["error_code"],
                error_message=r["error_message"],
            )
            for r in ex.run("attempt_list", {"job_id": job_id})
        ]

    def artifact_list(self, ex: Executor, job_id: int) -> list[Artifact]:
        return [
            Artifact(
                artifact_type=r["artifact_type"],
                payload=_json_in(r["payload"]),
                ref=r["ref"],
                job_id=int(r["job_id"]),
                created_at=self.ts_out(r["created_at"]),
            )
            for r in ex.run("artifact_list", {"job_id": job_id})
        ]

    # ---- the worker's writes (all fenced) ---------------------------------------------------

    def job_claim(
        self,
        ex: Executor,
        *,
        queues: Sequence[str],
        worker_id: str,
        limit: int,
        lease_seconds: float,
    ) -> list[Job]:
        """Claim up to ``limit`` ready jobs, one statement per queue, in this transaction.

        Queues are independent (as in Oban and River): each is read in priority, run_at,
        id order; the queue asked first rotates per call so none starves the others.
        """
        names = list(dict.fromkeys(queues))
        if not names or limit < 1:
            return []
        self._claim_turn = (getattr(self, "_claim_turn", -1) + 1) % len(names)
        order = names[self._claim_turn :] + names[: self._claim_turn]
        now = self.now_param()
        claimed: list[Job] = []
        for queue in order:
            rows = ex.values(
                "job_claim",
                {
                    "queue": queue,
                    "worker_id": worker_id,
                    "limit": limit - len(claimed),
                    "lease_seconds": lease_seconds,
                    "now": now,
                },
            )
            claimed.extend(map(self.job_from_values, rows))
            if len(claimed) >= limit:
                break
        return sorted(claimed, key=_claim_order)

    def job_claim_id(
        self, ex: Executor, job_id: int, *, worker_id: str, lease_seconds: float
    ) -> Job | None:
        rows = ex.run(
            "job_claim_id",
            {
                "id": job_id,
                "worker_id": worker_id,
                "lease_seconds": lease_seconds,
                "now": self.now_param(),
            },
        )
        return self.job_from_row(rows[0]) if rows else None

    def job_finish(self, ex: Executor, req: FinishRequest) -> Job:
        """Write an outcome if this worker still owns the job, else raise ``LeaseLost``."""
        change = req.change
        now = self.now_param()
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
            "now": now,
        }
        rows = ex.run("job_finish", params)
        if not rows:
            raise LeaseLost(req.job_id, req.claim_version)
        job = self.job_from_row(rows[0])
        self._after_finish(ex, job, req, params)
        for artifact in req.artifacts if job.state is JobState.SUCCEEDED else ():
            ex.run(
                "artifact_insert",
                {
                    "job_id": job.id,
                    "artifact_type": artifact.artifact_type,
                    "ref": artifact.ref,
                    "payload": json.dumps(artifact.payload),
                    "now": now,
                },
            )
        return job

    def _after_finish(  # noqa: B027 - a hook: PostgreSQL needs nothing here
        self, ex: Executor, job: Job, req: FinishRequest, params: Mapping[str, Any]
    ) -> None:
        """Dialects that cannot write the attempt record in the finish statement do it here."""

    def job_heartbeat(
        self, ex: Executor, job_id: int, claim_version: int, lease_seconds: float
    ) -> bool:
        """Extend the lease. Returns ``cancel_requested``; raises ``LeaseLost``."""
        rows = ex.run(
            "job_heartbeat",
            {
                "id": job_id,
                "claim_version": claim_version,
                "lease_seconds": lease_seconds,
                "now": self.now_param(),
            },
        )
        if not rows:
            raise LeaseLost(job_id, claim_version)
        return bool(rows[0]["cancel_requested"])

    def job_heartbeat_many(
        self, ex: Executor, held: Sequence[tuple[int, int]], lease_seconds: float
    ) -> dict[int, bool]:
        """Extend many leases at once: ``{job_id: cancel_requested}`` for those still held."""
        out: dict[int, bool] = {}
        for job_id, version in held:
            try:
                out[job_id] = self.job_heartbeat(ex, job_id, version, lease_seconds)
            except LeaseLost:
                continue
        return out

    def job_set_stage(
        self,
        ex: Executor,
        job: Job,
        claim_version: int,
        stage: str,
        expected_stage: str | None,
        lease_seconds: float,
    ) -> bool:
        rows = ex.run(
            "job_set_stage",
            {
                "id": job.id,
                "claim_version": claim_version,
                "stage": stage,
                "expected_stage": expected_stage,
                "lease_seconds": lease_seconds,
                "now": self.now_param(),
            },
        )
        if rows:
            return bool(rows[0]["cancel_requested"])
        current = ex.run("job_get", {"id": job.id})
        if (
            current
            and current[0]["state"] == "running"
            and int(current[0]["claim_version"]) == claim_version
        ):
            raise InvalidStage(
                f"job {job.id} is at stage {current[0]['stage']!r}; it cannot move to "
                f"{stage!r} (expected to come from {expected_stage!r}). Stages advance in "
                "the order the task declares"
            )
        raise LeaseLost(job.id, claim_version)

    def job_expired(self, ex: Executor, limit: int) -> list[Job]:
        rows = ex.run("job_expired", {"limit": limit, "now": self.now_param()})
        return [self.job_from_row(r) for r in rows]

    def job_reclaim(self, ex: Executor, limit: int = 100) -> list[Job]:
        """Expired leases → ``retry_wait`` or ``dead_letter`` by the failure rules."""
        reclaimed = []
        for job in self.job_expired(ex, limit):
            change = states.outcome_to_change(
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                policy=policy_from_dict(job.retry_policy),
                outcome=states.Lost(),
            )
            req = FinishRequest(job.id, job.claim_version, job.worker_id, change, None)
            try:
                reclaimed.append(self.job_finish(ex, req))
            except LeaseLost:  # the owner finished it between our read and write
                continue
        return reclaimed

    # ---- operator actions -------------------------------------------------------------------

    def job_cancel(self, ex: Executor, job_id: int) -> Job:
        now = self.now_param()
        rows = ex.run(
            "job_cancel_ready",
            {"id": job_id, "from_states": self.list_param(sorted(states.cancel())), "now": now},
        )
        if not rows:
            rows = ex.run("job_cancel_running", {"id": job_id, "now": now})
        if rows:
            return self.job_from_row(rows[0])
        return self.job_get(ex, job_id)  # terminal: a no-op that reports the state

    def job_requeue(self, ex: Executor, job_id: int) -> tuple[Job, bool]:
        """``(job, idempotent)``: a running job is left alone and reported as such."""
        rows = ex.run(
            "job_requeue",
            {
                "id": job_id,
                "from_states": self.list_param(sorted(states.requeue())),
                "now": self.now_param(),
            },
        )
        if rows:
            return self.job_from_row(rows[0]), False
        return self.job_get(ex, job_id), True

    # ---- queues -----------------------------------------------------------------------------

    def queue_set_paused(self, ex: Executor, name: str, paused: bool) -> None:
        ex.run("queue_set_paused", {"name": name, "paused": paused, "now": self.now_param()})

    def queue_stats(self, ex: Executor) -> dict[str, dict[str, Any]]:
        """Per queue: counts by state, ready count, oldest and p95 age (seconds) of ready jobs."""
        stats: dict[str, dict[str, Any]] = {}

        def entry(name: str) -> dict[str, Any]:
            return stats.setdefault(
                name,
                {
                    "counts": {str(s): 0 for s in JobState},
                    "ready": 0,
                    "oldest_age_seconds": None,
                    "p95_age_seconds": None,
                    "paused": False,
                },
            )

        for row in ex.run("queue_counts", {}):
            entry(row["queue"])["counts"][row["state"]] = int(row["n"])
        for row in ex.run("queue_list", {}):
            entry(row["name"])["paused"] = bool(row["paused"])
        for row in self._ready_ages(ex):
            e = entry(row["queue"])
            e["ready"] = int(row["ready"])
            e["oldest_age_seconds"] = max(0.0, float(row["oldest_age"]))
            e["p95_age_seconds"] = max(0.0, float(row["p95_age"]))
        return stats

    def _ready_ages(self, ex: Executor) -> list[dict[str, Any]]:
        return ex.run("queue_ready_ages", {"now": self.now_param()})

    # ---- worker runtime: batched writes, the registry, maintenance ----------------------

    def job_finish_many(
        self, ex: Executor, reqs: Sequence[FinishRequest]
    ) -> list[Finished | LeaseLost]:
        """Many fenced outcome writes in one transaction; a lost lease is reported per job."""
        out: list[Finished | LeaseLost] = []
        for req in reqs:
            try:
                out.append(Finished.of(self.job_finish(ex, req)))
            except LeaseLost as exc:
                out.append(exc)
        return out

    def finish_batch(self, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
        """The worker's batched outcome write, in a transaction of its own."""
        with self.transaction() as ex:
            return self.job_finish_many(ex, reqs)

    def job_next_due(self, ex: Executor, queues: Sequence[str]) -> float | None:
        """Seconds until the next scheduled job of ``queues`` comes due, or None."""
        rows = ex.run(
            "job_next_due", {"queues": self.list_param(list(queues)), "now": self.now_param()}
        )
        wait = rows[0]["wait_s"] if rows else None
        return None if wait is None else max(0.0, float(wait))

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
        ex.run(
            "worker_register",
            {
                "id": worker_id,
                "hostname": hostname,
                "pid": pid,
                "queues": json.dumps(list(queues)),
                "concurrency": concurrency,
                "heartbeat_seconds": heartbeat_seconds,
                "now": self.now_param(),
            },
        )

    def worker_heartbeat(self, ex: Executor, worker_id: str, processed: int) -> None:
        ex.run(
            "worker_heartbeat",
            {"id": worker_id, "processed": processed, "now": self.now_param()},
        )

    def worker_stop(self, ex: Executor, worker_id: str, processed: int) -> None:
        ex.run("worker_stop", {"id": worker_id, "processed": processed, "now": self.now_param()})

    def worker_list(self, ex: Executor, *, include_stopped: bool, limit: int) -> list[WorkerInfo]:
        rows = ex.run(
            "worker_list",
            {"include_stopped": include_stopped, "limit": limit, "now": self.now_param()},
        )
        return [
            WorkerInfo(
                id=r["id"],
                hostname=r["hostname"],
                pid=int(r["pid"]),
                queues=list(_json_in(r["queues"]) or []),
                concurrency=int(r["concurrency"]),
                started_at=self.ts_out(r["started_at"]) or _epoch(),
                heartbeat_at=self.ts_out(r["heartbeat_at"]) or _epoch(),
                stopped_at=self.ts_out(r["stopped_at"]),
                alive=bool(r["alive"]),
                running=int(r["running"]),
                processed=int(r["processed"]),
                heartbeat_seconds=float(r["heartbeat_seconds"]),
            )
            for r in rows
        ]

    def worker_prune(self, ex: Executor, older_than: float) -> None:
        ex.run("worker_prune", {"older_than": older_than, "now": self.now_param()})

    def leader_acquire(self, ex: Executor, name: str, holder: str, ttl: float) -> bool:
        """Take or renew the ``name`` role for ``ttl`` seconds; True if ``holder`` leads."""
        rows = ex.run(
            "leader_acquire",
            {"name": name, "holder": holder, "ttl": ttl, "now": self.now_param()},
        )
        return bool(rows) and rows[0]["holder"] == holder

    def leader_release(self, ex: Executor, name: str, holder: str) -> None:
        ex.run("leader_release", {"name": name, "holder": holder})

    def leader_get(self, ex: Executor, name: str) -> str | None:
        rows = ex.run("leader_get", {"name": name, "now": self.now_param()})
        return str(rows[0]["holder"]) if rows else None

    def job_prune(self, ex: Executor, state: JobState, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` ``state`` jobs finished more than ``older_than`` seconds
        ago, leaving a tombstone for each so their ids answer "gone". Returns the count."""
        rows = ex.run(
            "job_prune_ids",
            {
                "state": str(state),
                "older_than": older_than,
                "limit": limit,
                "now": self.now_param(),
            },
        )
        ids = [int(r["id"]) for r in rows]
        if ids:
            ex.run("tombstone_insert_many", {"ids": self.list_param(ids), "now": self.now_param()})
            ex.run("job_delete_many", {"ids": self.list_param(ids)})
        return len(ids)

    def tombstone_prune(self, ex: Executor, older_than: float, limit: int) -> None:
        ex.run(
            "tombstone_prune", {"older_than": older_than, "limit": limit, "now": self.now_param()}
        )

    def idempotency_prune(self, ex: Executor, limit: int) -> None:
        ex.run("idem_prune", {"limit": limit, "now": self.now_param()})


def nearest_rank(n: int, fraction: float) -> int:
    """0-based index of the nearest-rank percentile in an ascending list of ``n`` values."""
    return max(0, math.ceil(fraction * n) - 1)


def _claim_order(job: Job) -> tuple[int, datetime, int]:
    return (job.priority, job.run_at, job.id)


_STATES: dict[str, JobState] = {str(state): state for state in JobState}
#: A batch of requests as one JSON parameter (the worker's batched writes, both dialects).
json_param = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
#: ``Job``'s fields, in the order of every dialect's ``{job_columns}`` block.
JOB_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Job))


def _json_in(value: Any) -> Any:
    if value is None:
        return None
    if value == "{}":  # most jobs' retry_policy: skip the parser
        return {}
    if isinstance(value, str | bytes | bytearray):
        return json.loads(value)
    return value


def _epoch() -> datetime:
    return datetime.fromtimestamp(0, UTC)


def iter_chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
