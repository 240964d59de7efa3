"""Rows to durq's types: every decoding a driver does, written once for both dialects."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from ..types import Artifact, Attempt, Finished, Job, JobState, WorkerInfo
from .base import DriverCore, FinishRequest, NewJob

__all__ = ["JOB_FIELDS", "RowCodec", "epoch", "finish_row", "json_in", "json_param", "new_job"]

#: ``Job``'s fields, in the order of every dialect's ``{job_columns}`` block.
JOB_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Job))
#: A batch of requests as one JSON parameter (the worker's batched writes, both dialects).
json_param = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_STATES: dict[str, JobState] = {str(state): state for state in JobState}
#: ``Job``'s slots, in field order. Setting them directly skips the frozen dataclass's
#: ``__init__``, an ``object.__setattr__`` per field: 40 % of a claimed Job's cost.
_JOB_SLOTS = tuple(getattr(Job, name).__set__ for name in JOB_FIELDS)


def new_job(values: Sequence[Any]) -> Job:
    """``Job(*values)``, faster: ``values`` in field order, already decoded."""
    job = object.__new__(Job)
    for set_slot, value in zip(_JOB_SLOTS, values, strict=True):
        set_slot(job, value)
    return job


def finish_row(req: FinishRequest) -> list[Any]:
    """The leading columns of one outcome in a batched finish, in both dialects' order:
    id, claim_version, to_state, refund, bump, delay, error_code, error_message."""
    c = req.change
    return [
        req.job_id,
        req.claim_version,
        str(c.to_state),
        1 if c.refund_attempt else 0,
        1 if c.bump_version else 0,
        c.delay,
        c.error_code,
        c.error_message,
    ]


def json_in(value: Any) -> Any:
    if value is None:
        return None
    if value == "{}":  # a common stored value: skip the parser
        return {}
    if isinstance(value, str | bytes | bytearray):
        return json.loads(value)
    return value


#: Stored retry policies decoded so far: a queue's jobs share a handful of them.
_POLICIES: dict[str, dict[str, Any]] = {}
_MAX_POLICIES = 256


def policy_in(value: Any) -> dict[str, Any]:
    """A stored retry policy as a dict of its own (a caller may change it), decoded once per
    distinct text: on the claim path, the parse cost as much as building the Job."""
    if not isinstance(value, str):
        return dict(json_in(value) or {})
    policy = _POLICIES.get(value)
    if policy is None:
        if len(_POLICIES) >= _MAX_POLICIES:
            _POLICIES.clear()
        policy = _POLICIES[value] = json.loads(value) or {}
    return {k: list(v) if isinstance(v, list) else v for k, v in policy.items()}


def epoch() -> datetime:
    return datetime.fromtimestamp(0, UTC)


class RowCodec(DriverCore):
    """Decoding shared by both dialects; times go through the dialect's ``ts_out``."""

    def job_from_row(self, row: Mapping[str, Any]) -> Job:
        return self.job_from_values([row[name] for name in JOB_FIELDS])

    def job_from_values(self, v: Sequence[Any]) -> Job:
        """A ``Job`` from one row of ``{job_columns}``, whose order is ``Job``'s own.

        On the claim path for every job: positional, and no conversions the drivers already
        made (integers come back as int from every driver durq speaks)."""
        ts = self.ts_out
        return new_job(
            (
                v[0],
                v[1],
                v[2],
                json_in(v[3]) or {},
                _STATES[v[4]],
                v[5],
                v[6],
                v[7],
                v[8],
                v[9],
                v[10],
                ts(v[11]) or epoch(),
                ts(v[12]) or epoch(),
                ts(v[13]) or epoch(),
                ts(v[14]),
                ts(v[15]),
                ts(v[16]),
                ts(v[17]),
                v[18],
                v[19],
                json_in(v[20]),
                policy_in(v[21]),
                bool(v[22]),
                v[23],
                v[24],
                v[25],
                v[26],
            )
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
            breaker_key=new.breaker_key,
            concurrency_key=new.concurrency_key,
        )

    def finished_from_row(self, row: Mapping[str, Any]) -> Finished:
        return Finished(
            row["id"],
            _STATES[row["state"]],
            self.ts_out(row["run_at"]) or epoch(),
            row["last_error_code"],
            row["last_error"],
        )

    def attempt_from_row(self, r: Mapping[str, Any]) -> Attempt:
        return Attempt(
            job_id=int(r["job_id"]),
            attempt=int(r["attempt"]),
            claim_version=int(r["claim_version"]),
            worker_id=r["worker_id"],
            started_at=self.ts_out(r["started_at"]),
            finished_at=self.ts_out(r["finished_at"]) or epoch(),
            runtime_ms=r["runtime_ms"],
            outcome=r["outcome"],
            error_code=r["error_code"],
            error_message=r["error_message"],
            processed=r.get("processed"),
            failed=r.get("failed"),
            summary=r.get("summary"),
            traceback=r.get("traceback"),
        )

    def artifact_from_row(self, r: Mapping[str, Any]) -> Artifact:
        return Artifact(
            artifact_type=r["artifact_type"],
            payload=json_in(r["payload"]),
            ref=r["ref"],
            job_id=int(r["job_id"]),
            created_at=self.ts_out(r["created_at"]),
        )

    def worker_from_row(self, r: Mapping[str, Any]) -> WorkerInfo:
        return WorkerInfo(
            id=r["id"],
            hostname=r["hostname"],
            pid=int(r["pid"]),
            queues=list(json_in(r["queues"]) or []),
            concurrency=int(r["concurrency"]),
            started_at=self.ts_out(r["started_at"]) or epoch(),
            heartbeat_at=self.ts_out(r["heartbeat_at"]) or epoch(),
            stopped_at=self.ts_out(r["stopped_at"]),
            alive=bool(r["alive"]),
            running=int(r["running"]),
            processed=int(r["processed"]),
            heartbeat_seconds=float(r["heartbeat_seconds"]),
        )
