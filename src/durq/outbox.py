"""The outbox, webhooks and job secrets as ``App`` offers them: enqueue options, event
reads, redelivery, credential updates and KEK rotation.

Events are written by the database in the transaction of each state change (migration
0006); this module only reads them and lets operators act on them. Secrets are sealed
here, in the enqueuing process, and opened only in the worker (``ctx.secrets``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ._drivers import Driver, Executor, NewJob
from ._engine import jobs
from ._engine.secrets import Keyring, keyring_from_settings
from .errors import EventNotFound, SecretUnavailable, ValidationError
from .settings import Settings
from .types import Job, OutboxEvent

__all__ = ["EVENT_STATES", "OutboxOperations", "validate_webhook_url"]

EVENT_STATES = ("pending", "delivering", "delivered", "dead_letter")
MAX_EVENT_PAGE = 1000


def validate_webhook_url(url: Any, what: str = "webhook_url") -> str:
    if not isinstance(url, str) or len(url) > 2048:
        raise ValidationError(f"{what} must be an http(s) URL of at most 2048 characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError(f"{what} must be an absolute http(s) URL, got {url[:100]!r}")
    return url


def validate_secrets(values: Any) -> dict[str, Any]:
    if not isinstance(values, Mapping) or not all(isinstance(k, str) for k in values):
        raise ValidationError("secrets must be a dict of name to value")
    try:
        json.dumps(dict(values))
    except (TypeError, ValueError):
        raise ValidationError("secrets values must be plain JSON values") from None
    return dict(values)


class OutboxOperations:
    """Mixed into ``App``: everything about events and secrets."""

    settings: Settings
    _keyring: Keyring | None = None

    @property
    def driver(self) -> Driver:
        raise NotImplementedError

    @property
    def keyring(self) -> Keyring:
        if self._keyring is None:
            self._keyring = keyring_from_settings(self.settings)
        return self._keyring

    # ---- enqueue options ---------------------------------------------------------------

    def with_webhook(self, new: NewJob, webhook_url: str | None) -> NewJob:
        """``new`` with its webhook: the one given, else the owner's default, else none."""
        if webhook_url is None and new.created_by is not None:
            webhook_url = self.settings.webhook_owner_urls.get(new.created_by)
        if webhook_url is None:
            return new
        return replace(new, webhook_url=validate_webhook_url(webhook_url))

    def check_secrets(self, values: Any, refresh_url: str | None) -> dict[str, Any]:
        """Validate before anything is written: a bad request writes nothing."""
        checked = validate_secrets(values if values is not None else {})
        if refresh_url is not None:
            validate_webhook_url(refresh_url, "refresh_url")
        if checked and self.keyring.active is None:
            self.keyring.seal(0, None, 1, {})  # raises the configuration error
        return checked

    def store_secrets(
        self, ex: Executor, job: Job, values: dict[str, Any], refresh_url: str | None
    ) -> None:
        sealed = self.keyring.seal(
            job.id,
            job.created_by,
            1,
            values,
            refresh_url=refresh_url,
            max_refresh_attempts=self.settings.max_refresh_attempts,
        )
        self.driver.secret_insert(ex, sealed)

    # ---- events ------------------------------------------------------------------------

    def list_events(
        self,
        *,
        job_id: int | None = None,
        state: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[OutboxEvent]:
        """Events in order (oldest first); page with ``after_id`` = the last ``sequence``."""
        if state is not None and state not in EVENT_STATES:
            raise ValidationError(f"unknown event state {state!r}; use one of {EVENT_STATES}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError(f"limit must be an integer from 1 to {MAX_EVENT_PAGE}")
        with self.driver.read() as ex:
            if job_id is not None:
                jobs.get(self.driver, ex, int(job_id))
            return self.driver.outbox_list(
                ex, job_id=job_id, state=state, after_id=after_id, limit=limit
            )

    def get_event(self, event_id: str) -> OutboxEvent:
        with self.driver.read() as ex:
            event = self.driver.outbox_get(ex, str(event_id))
        if event is None:
            raise EventNotFound(str(event_id))
        return event

    def redeliver(self, event_id: str) -> OutboxEvent:
        """A dead-lettered (or delivered) event → pending, its delivery attempts reset.
        An event still pending or delivering is returned unchanged."""
        with self.driver.transaction() as ex:
            event = self.driver.outbox_redeliver(ex, str(event_id))
            if event is not None:
                self.driver.outbox_notify(ex)
        return event if event is not None else self.get_event(event_id)

    def job_counters(self, job_id: int) -> dict[str, int]:
        """The three counters, kept apart: execution, credential refresh, delivery."""
        with self.driver.read() as ex:
            job = jobs.get(self.driver, ex, int(job_id))
            sealed = self.driver.secret_get(ex, job.id)
            events = self.driver.outbox_list(
                ex, job_id=job.id, state=None, after_id=None, limit=MAX_EVENT_PAGE
            )
        return {
            "execution_attempts": job.attempt,
            "refresh_attempts": sealed.refresh_attempts if sealed else 0,
            "delivery_attempts": sum(e.attempt for e in events),
        }

    # ---- secrets -----------------------------------------------------------------------

    def credential_version(self, job_id: int) -> int | None:
        with self.driver.read() as ex:
            sealed = self.driver.secret_get(ex, int(job_id))
        return sealed.credential_version if sealed else None

    def update_secrets(
        self, job_id: int, values: Mapping[str, Any], *, expected_version: int | None = None
    ) -> int:
        """Replace a job's secrets, sealed for the next ``credential_version``; returns it.

        With ``expected_version``, only if the stored version is still that one (a refresh
        endpoint answering a worker's request names the version the worker saw)."""
        checked = validate_secrets(values)
        with self.driver.transaction() as ex:
            current = self.driver.secret_get(ex, int(job_id))
            if current is None:
                raise SecretUnavailable(f"job {job_id} carries no secrets to update")
            if expected_version is not None and current.credential_version != expected_version:
                return current.credential_version
            version = current.credential_version + 1
            sealed = self.keyring.seal(
                current.job_id,
                current.owner,
                version,
                checked,
                refresh_url=current.refresh_url,
                max_refresh_attempts=current.max_refresh_attempts,
            )
            if not self.driver.secret_replace(ex, sealed, current.credential_version):
                raise SecretUnavailable(f"job {job_id}: its secrets changed meanwhile; retry")
        return version

    def rotate_kek(self, from_kek: str, to_kek: str, *, batch: int = 500) -> int:
        """Re-wrap every data key wrapped by ``from_kek`` under ``to_kek``; the sealed
        blobs are not decrypted. Returns how many were re-wrapped."""
        ring = self.keyring
        for kek_id in (from_kek, to_kek):
            if kek_id not in ring.kek_ids:
                raise ValidationError(
                    f"KEK {kek_id!r} is not configured here (known: {ring.kek_ids}); both the "
                    "old and the new KEK must be in DURQ_SECRET_KEKS during a rotation"
                )
        done, after = 0, 0
        while True:
            with self.driver.read() as ex:
                page = self.driver.secret_by_kek(ex, from_kek, after_id=after, limit=batch)
            if not page:
                return done
            with self.driver.transaction() as ex:
                for sealed in page:
                    wrapped = ring.rewrap(sealed, to_kek)
                    done += self.driver.secret_rewrap(
                        ex, sealed.job_id, old_kek_id=from_kek, kek_id=to_kek, dek_wrapped=wrapped
                    )
            after = page[-1].job_id
