"""The recipe's durq tasks, both on queue ``ingest``, and the runtime that wires them.

Retries: durq's ``Fixed(BACKFILL_RETRY_DELAYS_SECONDS)`` with ``max_attempts=5`` is the one
retry loop. The durable row is kept in step: each failed attempt marks the row ``failed``
(attempts + 1), resets it to ``pending`` while attempts < 5 and raises ``durq.Retry`` with
``delay[attempts - 1]``; at 5 it stays ``failed`` and ``durq.Fail`` dead-letters the job.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

import durq

from . import default_library_closure as closure
from .db import SessionFactory, make_engine, make_session_factory
from .errors import NotFoundError
from .media import ingest_web_article
from .models import create_schema

__all__ = ["INGEST_TASK_NAME", "NexusRuntime", "create_runtime", "run_backfill"]

log = logging.getLogger("nexus.tasks.backfill")

INGEST_TASK_NAME = "ingest_web_article"
E_INVALID_TUPLE = "E_INVALID_TUPLE"
E_MATERIALIZATION_FAILED = "E_MATERIALIZATION_FAILED"


@dataclass
class NexusRuntime:
    """A durq App with the recipe's tasks registered, and sessions on the same database."""

    app: durq.App
    engine: Engine
    sessions: SessionFactory

    def close(self) -> None:
        self.engine.dispose()


def _key(default_library_id: str, source_library_id: str, user_id: str) -> closure.BackfillKey:
    try:
        ids = [uuid.UUID(v) for v in (default_library_id, source_library_id, user_id)]
    except (TypeError, ValueError, AttributeError):
        raise durq.Fail(E_INVALID_TUPLE, "backfill task args must be three UUIDs") from None
    return closure.BackfillKey(*ids)


def run_backfill(
    sessions: SessionFactory,
    task_id: int,
    default_library_id: str,
    source_library_id: str,
    user_id: str,
    request_id: str | None = None,
) -> dict[str, Any]:
    """One delivery of the backfill task (see the module docstring for the retry loop)."""
    fields: dict[str, Any] = {
        "task_name": closure.BACKFILL_TASK_NAME,
        "task_id": task_id,
        "request_id": request_id,
    }
    key = _key(default_library_id, source_library_id, user_id)
    with sessions.begin() as session:  # the backfill row first: validate and claim
        validation = closure.validate_backfill_job_tuple(session, key)
        if not validation.job_exists:
            log.info("backfill skipped: no such job row", extra=fields)
            return {"status": "skipped", "reason": "missing"}
        if closure.claim_backfill_job_pending(session, key, durq_job_id=task_id) is None:
            log.info("backfill skipped: job row is not pending", extra=fields)
            return {"status": "skipped", "reason": "not_pending"}
        if not validation.valid:  # d-007: terminal, no inserts, no retry
            closure.mark_backfill_job_failed(session, key, E_INVALID_TUPLE)
    if not validation.valid:
        log.error("backfill tuple invalid: %s", validation.error, extra=fields)
        raise durq.Fail(E_INVALID_TUPLE, validation.error)
    try:
        with sessions.begin() as session:  # then the membership row, then the writes
            member = closure.lock_membership(session, key.source_library_id, key.user_id)
            inserted = (
                closure.materialize_source_library(
                    session, key.default_library_id, key.source_library_id
                )
                if member
                else 0  # d-008: revoked before we got here: zero inserts, still completed
            )
            completed = closure.mark_backfill_job_completed(session, key)
    except Exception as exc:
        return _fail_attempt(sessions, key, exc, fields)
    _warn_if_backlog_degraded(sessions, fields)
    status = "completed" if completed is not None else "stale"
    log.info("backfill %s: %d closure edges inserted", status, inserted, extra=fields)
    return {"status": status, "membership_present": member, "edges_inserted": inserted}


def _fail_attempt(
    sessions: SessionFactory, key: closure.BackfillKey, exc: Exception, fields: dict[str, Any]
) -> dict[str, Any]:
    message = f"{type(exc).__name__}: {exc}"[:500]
    with sessions.begin() as session:
        failed = closure.mark_backfill_job_failed(session, key, E_MATERIALIZATION_FAILED)
        if failed is None:  # requeued or deleted meanwhile: this attempt is stale
            return {"status": "stale"}
        delay = closure.backfill_retry_delay_seconds(failed.attempts)
        if delay is not None:
            closure.reset_backfill_job_to_pending_for_retry(session, key)
    # The row's state is committed before durq writes the outcome: if that write is lost,
    # the lease expires and durq reclaims the job onto the same Fixed schedule.
    if delay is None:
        log.error("backfill failed for good after %d attempts", failed.attempts, extra=fields)
        raise durq.Fail(E_MATERIALIZATION_FAILED, message)
    log.warning("backfill attempt %d failed; retry in %ss", failed.attempts, delay, extra=fields)
    raise durq.Retry(after=delay, code=E_MATERIALIZATION_FAILED, message=message)


def _warn_if_backlog_degraded(sessions: SessionFactory, fields: dict[str, Any]) -> None:
    with sessions.begin() as session:
        health = closure.get_backfill_backlog_health(session)
    if health["degraded"]:
        log.warning(
            "backfill backlog degraded: %d pending, p95 age %.0fs",
            health["pending_count"],
            health["pending_age_p95_seconds"],
            extra={**fields, "backlog": health},
        )


def create_runtime(app: durq.App, *, create_tables: bool = True) -> NexusRuntime:
    """Register the recipe's tasks on ``app`` and open sessions on its database."""
    engine = make_engine(app.database_url)
    if create_tables:
        create_schema(engine)
    sessions = make_session_factory(engine)

    @app.task(
        name=closure.BACKFILL_TASK_NAME,
        queue=closure.BACKFILL_QUEUE,
        retry=durq.Fixed(closure.BACKFILL_RETRY_DELAYS_SECONDS),
        max_attempts=closure.BACKFILL_MAX_ATTEMPTS,
        pass_context=True,
    )
    def backfill_default_library_closure_job(
        ctx: durq.JobContext,
        default_library_id: str,
        source_library_id: str,
        user_id: str,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        return run_backfill(
            sessions, ctx.job.id, default_library_id, source_library_id, user_id, request_id
        )

    @app.task(name=INGEST_TASK_NAME, queue=closure.BACKFILL_QUEUE)
    def ingest_web_article_job(
        media_id: str, actor_user_id: str, request_id: str | None = None
    ) -> dict[str, Any]:
        try:
            with sessions.begin() as session:
                kept = ingest_web_article(session, uuid.UUID(media_id), uuid.UUID(actor_user_id))
        except NotFoundError as exc:
            raise durq.Fail("E_NOT_FOUND", exc.message) from None
        return {"media_id": str(kept)}

    return NexusRuntime(app=app, engine=engine, sessions=sessions)
