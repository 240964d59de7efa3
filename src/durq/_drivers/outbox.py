"""Typed outbox, secret and nonce queries: one method per named SQL block, no policy.

Outbox events live under the jobs' ownership protocol: a claim sets a fresh
``claim_version`` and lease, heartbeats extend it, every later write names the version
(a write that matched nothing returns ``None``), expired leases are read for reclaim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LeaseLost
from ..types import OutboxEvent, SealedSecrets
from .rows import RowCodec, epoch, json_in
from .sql import Executor

__all__ = ["DeliveryWrite", "OutboxQueries"]


@dataclass(frozen=True, slots=True)
class DeliveryWrite:
    """One fenced write for an event held at ``claim_version``: its next state."""

    id: int
    claim_version: int
    to_state: str  # delivered, pending (retry after ``delay``), dead_letter
    delay: float | None = None
    status: int | None = None
    error: str | None = None
    bump: bool = False  # a reclaim takes the event with a new claim_version


class OutboxQueries(RowCodec):
    def event_from_row(self, r: Mapping[str, Any]) -> OutboxEvent:
        ts = self.ts_out
        return OutboxEvent(
            id=int(r["id"]),
            event_id=str(r["event_id"]),
            job_id=int(r["job_id"]),
            owner=r["owner"],
            url=r["url"],
            event_type=r["event_type"],
            payload=json_in(r["payload"]) or {},
            state=r["state"],
            attempt=int(r["attempt"]),
            claim_version=int(r["claim_version"]),
            worker_id=r["worker_id"],
            next_attempt_at=ts(r["next_attempt_at"]) or epoch(),
            lease_expires_at=ts(r["lease_expires_at"]),
            created_at=ts(r["created_at"]) or epoch(),
            updated_at=ts(r["updated_at"]) or epoch(),
            delivered_at=ts(r["delivered_at"]),
            last_status=r["last_status"],
            last_error=r["last_error"],
        )

    # ---- the lease: claim, heartbeat, finish ------------------------------------------

    def outbox_claim(
        self, ex: Executor, *, worker_id: str, limit: int, lease_seconds: float
    ) -> list[OutboxEvent]:
        params = {
            "worker_id": worker_id,
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": self.now_param(),
        }
        rows = ex.run("outbox_claim", params)
        return sorted((self.event_from_row(r) for r in rows), key=lambda e: e.id)

    def outbox_heartbeat_many(
        self, ex: Executor, held: Sequence[tuple[int, int]], lease_seconds: float
    ) -> set[int]:
        """Extend the leases of ``(id, claim_version)`` pairs: the ids still held."""
        alive: set[int] = set()
        for event_id, version in held:
            params = {
                "id": event_id,
                "claim_version": version,
                "lease_seconds": lease_seconds,
                "now": self.now_param(),
            }
            if ex.run("outbox_heartbeat", params):
                alive.add(event_id)
        return alive

    def outbox_finish(self, ex: Executor, w: DeliveryWrite) -> OutboxEvent | None:
        params = {
            "id": w.id,
            "claim_version": w.claim_version,
            "to_state": w.to_state,
            "bump": 1 if w.bump else 0,
            "delay": w.delay,
            "status": w.status,
            "error": w.error,
            "now": self.now_param(),
        }
        rows = ex.run("outbox_finish", params)
        return self.event_from_row(rows[0]) if rows else None

    def finish_deliveries(self, writes: Sequence[DeliveryWrite]) -> list[OutboxEvent | LeaseLost]:
        """A batch of delivery outcomes in a transaction of its own; a lost lease is
        reported per event."""
        out: list[OutboxEvent | LeaseLost] = []
        with self.transaction() as ex:
            for w in writes:
                event = self.outbox_finish(ex, w)
                out.append(event if event is not None else LeaseLost(w.id, w.claim_version))
        return out

    def outbox_expired(self, ex: Executor, limit: int) -> list[OutboxEvent]:
        rows = ex.run("outbox_expired", {"limit": limit, "now": self.now_param()})
        return [self.event_from_row(r) for r in rows]

    # ---- reads and operator actions ---------------------------------------------------

    def outbox_get(self, ex: Executor, event_id: str) -> OutboxEvent | None:
        rows = ex.run("outbox_get", {"event_id": event_id})
        return self.event_from_row(rows[0]) if rows else None

    def outbox_list(
        self,
        ex: Executor,
        *,
        job_id: int | None,
        state: str | None,
        after_id: int | None,
        limit: int,
    ) -> list[OutboxEvent]:
        params = {"job_id": job_id, "state": state, "after_id": after_id, "limit": limit}
        return [self.event_from_row(r) for r in ex.run("outbox_list", params)]

    def outbox_redeliver(self, ex: Executor, event_id: str) -> OutboxEvent | None:
        rows = ex.run("outbox_redeliver", {"event_id": event_id, "now": self.now_param()})
        return self.event_from_row(rows[0]) if rows else None

    def outbox_notify(self, ex: Executor) -> None:
        """Wake delivery workers in other processes (a no-op where the database has no
        notifications; those workers poll)."""
        ex.run("outbox_notify")

    def outbox_counts(self, ex: Executor) -> dict[str, tuple[int, int]]:
        """``state → (events, delivery attempts)``."""
        return {r["state"]: (int(r["n"]), int(r["attempts"])) for r in ex.run("outbox_counts", {})}

    def outbox_latencies(self, ex: Executor) -> list[float]:
        return [float(r["seconds"]) for r in ex.run("outbox_latencies", {})]

    def outbox_forget_job(self, ex: Executor, job_id: int) -> None:
        ex.run("outbox_forget_job", {"id": job_id})

    # ---- sealed secrets ---------------------------------------------------------------

    def secret_from_row(self, r: Mapping[str, Any]) -> SealedSecrets:
        return SealedSecrets(
            job_id=int(r["job_id"]),
            owner=r["owner"],
            credential_version=int(r["credential_version"]),
            encrypted=r["secrets_encrypted"],
            dek_wrapped=r["secrets_dek_wrapped"],
            kek_id=r["secrets_kek_id"],
            encryption_version=int(r["secrets_encryption_version"]),
            refresh_url=r["refresh_url"],
            refresh_attempts=int(r["refresh_attempts"]),
            max_refresh_attempts=int(r["max_refresh_attempts"]),
        )

    def secret_insert(self, ex: Executor, sealed: SealedSecrets) -> None:
        ex.run(
            "secret_insert",
            {
                "job_id": sealed.job_id,
                "owner": sealed.owner,
                "credential_version": sealed.credential_version,
                "encrypted": sealed.encrypted,
                "dek_wrapped": sealed.dek_wrapped,
                "kek_id": sealed.kek_id,
                "encryption_version": sealed.encryption_version,
                "refresh_url": sealed.refresh_url,
                "max_refresh_attempts": sealed.max_refresh_attempts,
                "now": self.now_param(),
            },
        )

    def secret_get(self, ex: Executor, job_id: int) -> SealedSecrets | None:
        rows = ex.run("secret_get", {"job_id": job_id})
        return self.secret_from_row(rows[0]) if rows else None

    def secret_replace(self, ex: Executor, sealed: SealedSecrets, expected_version: int) -> bool:
        """Store ``sealed`` if the stored version is still ``expected_version``."""
        params = {
            "job_id": sealed.job_id,
            "credential_version": sealed.credential_version,
            "encrypted": sealed.encrypted,
            "dek_wrapped": sealed.dek_wrapped,
            "kek_id": sealed.kek_id,
            "encryption_version": sealed.encryption_version,
            "expected_version": expected_version,
            "now": self.now_param(),
        }
        return bool(ex.run("secret_replace", params))

    def secret_rewrap(
        self, ex: Executor, job_id: int, *, old_kek_id: str, kek_id: str, dek_wrapped: str
    ) -> bool:
        params = {
            "job_id": job_id,
            "old_kek_id": old_kek_id,
            "kek_id": kek_id,
            "dek_wrapped": dek_wrapped,
            "now": self.now_param(),
        }
        return bool(ex.run("secret_rewrap", params))

    def secret_by_kek(
        self, ex: Executor, kek_id: str, *, after_id: int, limit: int
    ) -> list[SealedSecrets]:
        rows = ex.run("secret_by_kek", {"kek_id": kek_id, "after_id": after_id, "limit": limit})
        return [self.secret_from_row(r) for r in rows]

    def secret_refresh_attempt(self, ex: Executor, job_id: int, claim_version: int) -> int | None:
        """Count one refresh for the lease holder: the new count, or None if not held."""
        params = {"job_id": job_id, "claim_version": claim_version, "now": self.now_param()}
        rows = ex.run("secret_refresh_attempt", params)
        return int(rows[0]["refresh_attempts"]) if rows else None

    # ---- webhook nonces (the receiver's replay window) --------------------------------

    def nonce_insert(self, ex: Executor, nonce: str, ttl: float) -> bool:
        """Record a nonce; False if it was seen within its window."""
        params = {"nonce": nonce, "ttl": ttl, "now": self.now_param()}
        return bool(ex.run("nonce_insert", params))

    def nonce_prune(self, ex: Executor) -> None:
        ex.run("nonce_prune", {"now": self.now_param()})
