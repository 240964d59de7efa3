"""Default-library closure, intrinsic provenance and the durable backfill state machine:
the one module that owns these invariants (d-002). The provenance helpers live in
``provenance.py`` to keep files small and are re-exported here.

Contract (seed 000):

* every helper takes a ``Session`` and works inside the caller's transaction; none calls
  ``commit()`` or ``rollback()`` (``enqueue_backfill_job`` uses a SAVEPOINT, which leaves the
  caller's transaction usable whatever happens);
* every insert is idempotent (``ON CONFLICT DO NOTHING``);
* worker lock order: the backfill row (claim) → the membership row
  ``(source_library_id, user_id)`` → closure writes and gc. Member removal takes the
  membership row first too, so the two serialize on it (d-008).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    case,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

import durq

from .errors import NotFoundError
from .models import (
    DefaultLibraryBackfillJob,
    DefaultLibraryClosureEdge,
    DefaultLibraryIntrinsic,
    Library,
    utcnow,
)
from .provenance import (
    add_media_to_default_library,
    add_media_to_non_default_library,
    default_library_id_for,
    ensure_library_media,
    gc_default_library_media,
    insert_ignore,
    lock_membership,
    materialize_source_library,
    remove_media_from_default_library,
    remove_media_from_non_default_library,
    remove_member_closure,
)

__all__ = [
    "BACKFILL_MAX_ATTEMPTS",
    "BACKFILL_PENDING_AGE_P95_GUARDRAIL_SECONDS",
    "BACKFILL_PENDING_COUNT_GUARDRAIL",
    "BACKFILL_QUEUE",
    "BACKFILL_RETRY_DELAYS_SECONDS",
    "BACKFILL_TASK_NAME",
    "BackfillKey",
    "BackfillRow",
    "RequeueOutcome",
    "TupleValidation",
    "add_media_to_default_library",
    "add_media_to_non_default_library",
    "backfill_retry_delay_seconds",
    "claim_backfill_job_pending",
    "default_library_id_for",
    "delete_backfill_job",
    "enqueue_backfill_job",
    "ensure_library_media",
    "gc_default_library_media",
    "get_backfill_backlog_health",
    "lock_membership",
    "mark_backfill_job_completed",
    "mark_backfill_job_failed",
    "materialize_source_library",
    "remove_media_from_default_library",
    "remove_media_from_non_default_library",
    "remove_member_closure",
    "requeue_backfill_job",
    "reset_backfill_job_to_pending_for_retry",
    "upsert_backfill_job_pending",
    "validate_backfill_job_tuple",
]

log = logging.getLogger("nexus.default_library_closure")

BACKFILL_RETRY_DELAYS_SECONDS = (60, 300, 900, 3600, 21600)
BACKFILL_MAX_ATTEMPTS = 5
BACKFILL_PENDING_AGE_P95_GUARDRAIL_SECONDS = 900
BACKFILL_PENDING_COUNT_GUARDRAIL = 500
BACKFILL_TASK_NAME = "backfill_default_library_closure_job"
BACKFILL_QUEUE = "ingest"  # d-003: routed explicitly, never by a default queue

Job = DefaultLibraryBackfillJob
Edge = DefaultLibraryClosureEdge
Intrinsic = DefaultLibraryIntrinsic


@dataclass(frozen=True)
class BackfillKey:
    default_library_id: uuid.UUID
    source_library_id: uuid.UUID
    user_id: uuid.UUID

    def where(self) -> ColumnElement[bool]:
        return and_(
            Job.default_library_id == self.default_library_id,
            Job.source_library_id == self.source_library_id,
            Job.user_id == self.user_id,
        )


@dataclass(frozen=True)
class BackfillRow:
    """The operator's view of one durable backfill row (d-012)."""

    key: BackfillKey
    status: str
    attempts: int
    last_error_code: str | None
    updated_at: datetime
    finished_at: datetime | None


_ROW_COLUMNS = (Job.status, Job.attempts, Job.last_error_code, Job.updated_at, Job.finished_at)


def _row(key: BackfillKey, values: Sequence[Any]) -> BackfillRow:
    return BackfillRow(key, values[0], values[1], values[2], values[3], values[4])


# ---- durable backfill state machine ----------------------------------------------------


@dataclass(frozen=True)
class TupleValidation:
    job_exists: bool
    error: str | None = None  # why the tuple is invalid; None when it is valid

    @property
    def valid(self) -> bool:
        return self.job_exists and self.error is None


def validate_backfill_job_tuple(session: Session, key: BackfillKey) -> TupleValidation:
    """d-007: the row exists, the default library is the user's default, the source is not."""
    if session.execute(select(Job.status).where(key.where())).first() is None:
        return TupleValidation(job_exists=False, error="backfill job row does not exist")
    default = session.get(Library, key.default_library_id)
    if default is None or not default.is_default or default.owner_user_id != key.user_id:
        return TupleValidation(True, "default_library_id is not the default library of user_id")
    source = session.get(Library, key.source_library_id)
    if source is None or source.is_default:
        return TupleValidation(True, "source_library_id is not an existing non-default library")
    return TupleValidation(True)


def claim_backfill_job_pending(
    session: Session, key: BackfillKey, *, durq_job_id: int | None = None
) -> BackfillRow | None:
    """d-004: one atomic ``pending -> running`` statement with RETURNING; None is a no-op.

    A row left ``running`` by an earlier attempt of the same durq job (whose lease durq has
    since reclaimed) is taken back, and that lost attempt is counted.
    """
    claimable = Job.status == "pending"
    was_lost = and_(Job.status == "running", Job.running_job_id == durq_job_id)
    if durq_job_id is not None:
        claimable = or_(claimable, was_lost)
    stmt = (
        update(Job)
        .where(key.where(), claimable)
        .values(
            status="running",
            attempts=Job.attempts + case((was_lost, 1), else_=0),
            running_job_id=durq_job_id,
            updated_at=utcnow(),
        )
        .returning(*_ROW_COLUMNS)
        .execution_options(synchronize_session=False)
    )
    found = session.execute(stmt).first()
    return _row(key, found) if found is not None else None


def _guarded_transition(
    session: Session, key: BackfillKey, from_status: str, **values: Any
) -> BackfillRow | None:
    stmt = (
        update(Job)
        .where(key.where(), Job.status == from_status)
        .values(updated_at=utcnow(), **values)
        .returning(*_ROW_COLUMNS)
        .execution_options(synchronize_session=False)
    )
    found = session.execute(stmt).first()
    return _row(key, found) if found is not None else None


def mark_backfill_job_completed(session: Session, key: BackfillKey) -> BackfillRow | None:
    """d-005: ``running -> completed`` only; None means stale (the row moved on)."""
    return _guarded_transition(
        session, key, "running", status="completed", finished_at=utcnow(), running_job_id=None
    )


def mark_backfill_job_failed(
    session: Session, key: BackfillKey, error_code: str
) -> BackfillRow | None:
    """d-005: ``running -> failed``, attempts + 1, ``last_error_code``; None means stale."""
    return _guarded_transition(
        session,
        key,
        "running",
        status="failed",
        attempts=Job.attempts + 1,
        last_error_code=error_code,
        finished_at=utcnow(),
        running_job_id=None,
    )


def reset_backfill_job_to_pending_for_retry(
    session: Session, key: BackfillKey
) -> BackfillRow | None:
    """Retry branch: ``failed -> pending``, clearing ``finished_at`` and ``last_error_code``."""
    return _guarded_transition(
        session, key, "failed", status="pending", finished_at=None, last_error_code=None
    )


def backfill_retry_delay_seconds(attempts: int) -> int | None:
    """d-006: after the failure that made ``attempts``, wait ``delay[attempts - 1]``;
    None once ``attempts >= BACKFILL_MAX_ATTEMPTS`` (terminal, operator requeue only)."""
    if attempts < 1:
        raise ValueError(f"attempts counts failures and starts at 1, got {attempts}")
    if attempts >= BACKFILL_MAX_ATTEMPTS:
        return None
    return BACKFILL_RETRY_DELAYS_SECONDS[attempts - 1]


def upsert_backfill_job_pending(session: Session, key: BackfillKey) -> None:
    """The accept path's durable intent (pr-04): a pending row, once per tuple."""
    now = utcnow()
    insert_ignore(
        session,
        Job,
        {
            "default_library_id": key.default_library_id,
            "source_library_id": key.source_library_id,
            "user_id": key.user_id,
            "status": "pending",
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
        },
    )


def delete_backfill_job(session: Session, key: BackfillKey) -> int:
    result = session.execute(
        delete(Job).where(key.where()).execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)


# ---- dispatch, guardrails, operator requeue --------------------------------------------


def enqueue_backfill_job(
    default_library_id: uuid.UUID | str,
    source_library_id: uuid.UUID | str,
    user_id: uuid.UUID | str,
    request_id: str | None = None,
    countdown: float | None = None,
    *,
    app: durq.App,
    session: Session | None = None,
) -> bool:
    """Dispatch the backfill task on queue ``ingest``; True if a durq job was written.

    Never raises: a failure is logged and answers False. With ``session`` the job is
    written in the caller's transaction (it exists iff the caller commits), inside a
    SAVEPOINT so a refused insert leaves the rest of that transaction intact. With durq's
    ``env == "test"`` dispatch is skipped (False), as the seed asks.
    """
    args = {
        "default_library_id": str(default_library_id),
        "source_library_id": str(source_library_id),
        "user_id": str(user_id),
        "request_id": request_id,
    }
    fields = {"task_name": BACKFILL_TASK_NAME, "request_id": request_id, **args}
    if app.settings.env == "test":
        log.info("backfill dispatch skipped in the test environment", extra=fields)
        return False
    try:
        if session is None:
            app.enqueue(
                BACKFILL_TASK_NAME,
                args,
                queue=BACKFILL_QUEUE,
                delay=countdown,
                max_attempts=BACKFILL_MAX_ATTEMPTS,
            )
        else:
            with session.begin_nested():
                app.enqueue(
                    BACKFILL_TASK_NAME,
                    args,
                    queue=BACKFILL_QUEUE,
                    delay=countdown,
                    max_attempts=BACKFILL_MAX_ATTEMPTS,
                    connection=session,
                )
    except Exception:
        log.warning("backfill dispatch failed; the row stays pending", exc_info=True, extra=fields)
        return False
    return True


def get_backfill_backlog_health(db: Session) -> dict[str, Any]:
    """d-003 guardrail: ``{pending_count, pending_age_p95_seconds, degraded}``.

    Age counts from ``updated_at`` (when the row became pending); p95 is nearest-rank.
    ``degraded`` is the instantaneous breach; the alert's ``for: 15m`` makes it sustained.
    """
    now = utcnow()
    # One statement, so the count and the p95 read the same rows: removals delete pending
    # rows concurrently, and under READ COMMITTED each statement has a snapshot of its own.
    ranked = (
        select(
            Job.updated_at,
            func.count().over().label("n"),
            func.row_number().over(order_by=Job.updated_at.desc()).label("r"),
        )
        .where(Job.status == "pending")
        .subquery()
    )
    # nearest rank: the ceil(0.95 n)-th smallest age is the ceil(0.95 n)-th newest row
    found = db.execute(
        select(ranked.c.n, ranked.c.updated_at).where(ranked.c.r == (95 * ranked.c.n + 99) // 100)
    ).first()
    count = int(found.n) if found is not None else 0
    p95 = max(0.0, (now - found.updated_at).total_seconds()) if found is not None else 0.0
    degraded = p95 > BACKFILL_PENDING_AGE_P95_GUARDRAIL_SECONDS or (
        count > BACKFILL_PENDING_COUNT_GUARDRAIL
    )
    return {"pending_count": count, "pending_age_p95_seconds": p95, "degraded": degraded}


@dataclass(frozen=True)
class RequeueOutcome:
    row: BackfillRow
    idempotent: bool
    enqueue_dispatched: bool


def _runner_is_gone(app: durq.App, durq_job_id: int | None) -> bool:
    """A ``running`` row whose durq job already finished: its worker died mid-attempt."""
    if durq_job_id is None:
        return False
    try:
        return app.get_job(durq_job_id).is_terminal
    except durq.JobNotFound:  # JobGone (pruned) is a JobNotFound too
        return True


def requeue_backfill_job(
    session: Session, key: BackfillKey, *, app: durq.App, request_id: str | None = None
) -> RequeueOutcome:
    """Operator requeue: ``running`` is an idempotent no-op; ``pending``, ``failed`` and
    ``completed`` go back to ``pending`` with attempts, error and finish reset, and one
    dispatch is attempted in the same transaction (a failed dispatch keeps the reset)."""
    found = session.execute(
        select(*_ROW_COLUMNS, Job.running_job_id).where(key.where()).with_for_update()
    ).first()
    if found is None:
        raise NotFoundError(
            "no backfill job for (default_library_id, source_library_id, user_id); check the "
            "three ids, or the member was removed and the row deleted with them (d-009)"
        )
    if found[0] == "running" and not _runner_is_gone(app, found[5]):
        return RequeueOutcome(_row(key, found), idempotent=True, enqueue_dispatched=False)
    row = session.execute(
        update(Job)
        .where(key.where())
        .values(
            status="pending",
            attempts=0,
            last_error_code=None,
            finished_at=None,
            running_job_id=None,
            updated_at=utcnow(),
        )
        .returning(*_ROW_COLUMNS)
        .execution_options(synchronize_session=False)
    ).one()
    dispatched = enqueue_backfill_job(
        key.default_library_id,
        key.source_library_id,
        key.user_id,
        request_id,
        app=app,
        session=session,
    )
    return RequeueOutcome(_row(key, row), idempotent=False, enqueue_dispatched=dispatched)
