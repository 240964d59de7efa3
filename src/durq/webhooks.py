"""Receiving durq's webhooks: verify the signature, the time window and the nonce.

::

    from durq.webhooks import verify, MemoryNonceStore
    store = MemoryNonceStore()
    verify(request.headers, raw_body, ["whsec-new", "whsec-old"], nonce_store=store)

``verify`` raises :class:`WebhookRejected` (with a ``reason``) unless: the timestamp is
within ``tolerance`` seconds of now (either way, default 300), some signature in the
header equals ``HMAC-SHA256(secret, timestamp + "." + nonce + "." + raw_body)`` for some
secret (compared with :func:`hmac.compare_digest`), and the nonce was not seen within the
replay window (at least ``tolerance``). Dedupe deliveries by the event-id header: durq
delivers at least once.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from fastapi import HTTPException, Request

from ._drivers import Driver
from ._engine.signing import DEFAULT_PREFIX, Signer, header_names, sign

__all__ = [
    "MemoryNonceStore",
    "NonceStore",
    "Signer",
    "SqlNonceStore",
    "VerifiedWebhook",
    "WebhookRejected",
    "require_signature",
    "sign",
    "verify",
]


class WebhookRejected(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class NonceStore(Protocol):
    def remember(self, nonce: str, ttl: float) -> bool:
        """Record ``nonce`` for ``ttl`` seconds; False if it was seen within its window."""
        ...


class MemoryNonceStore:
    """Nonces in this process's memory (one receiver process)."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def remember(self, nonce: str, ttl: float) -> bool:
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > 10_000:
                self._seen = {n: t for n, t in self._seen.items() if t > now}
            if self._seen.get(nonce, 0.0) > now:
                return False
            self._seen[nonce] = now + ttl
            return True


class SqlNonceStore:
    """Nonces in durq's database (``durq_webhook_nonces``), shared by receiver processes."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def remember(self, nonce: str, ttl: float) -> bool:
        with self.driver.transaction() as ex:
            return self.driver.nonce_insert(ex, nonce, ttl)


class VerifiedWebhook:
    def __init__(self, event_id: str, timestamp: int, nonce: str, body: bytes) -> None:
        self.event_id = event_id
        self.timestamp = timestamp
        self.nonce = nonce
        self.body = body


def verify(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str | bytes],
    tolerance: float = 300,
    nonce_store: NonceStore | None = None,
    *,
    prefix: str = DEFAULT_PREFIX,
    now: float | None = None,
) -> VerifiedWebhook:
    """Check a received webhook; raise ``WebhookRejected`` if anything is off."""
    names = header_names(prefix)
    lower = {k.lower(): v for k, v in headers.items()}
    given = lower.get(names["signature"], "")
    stamp = lower.get(names["timestamp"], "")
    nonce = lower.get(names["nonce"], "")
    event_id = lower.get(names["event_id"], "")
    if not (given and stamp and nonce and event_id):
        raise WebhookRejected("missing signature, timestamp, nonce or event-id header")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookRejected("the timestamp is not an integer") from None
    if abs((now if now is not None else time.time()) - timestamp) > tolerance:
        raise WebhookRejected("the timestamp is outside the allowed window")
    candidates = [part.strip() for part in given.split(",") if part.strip()]
    matched = False
    for secret in secrets:
        expected = sign(secret, stamp, nonce, body)
        for candidate in candidates:
            # Every pair is compared, so the time taken says nothing about which matched.
            matched |= hmac.compare_digest(expected, candidate)
    if not matched:
        raise WebhookRejected("the signature does not match")
    if nonce_store is not None and not nonce_store.remember(nonce, max(tolerance, 300) * 2):
        raise WebhookRejected("the nonce was already used (a replay)")
    return VerifiedWebhook(event_id, timestamp, nonce, body)


def require_signature(
    secrets: Sequence[str | bytes],
    *,
    nonce_store: NonceStore | None = None,
    tolerance: float = 300,
    prefix: str = DEFAULT_PREFIX,
) -> Callable[[Request], Awaitable[VerifiedWebhook]]:
    """A FastAPI dependency: ``Depends(require_signature([...]))`` answers 401 for a
    request that fails :func:`verify`, else hands the route the verified webhook."""
    store = nonce_store if nonce_store is not None else MemoryNonceStore()

    async def dependency(request: Request) -> VerifiedWebhook:
        body = await request.body()
        try:
            return verify(request.headers, body, secrets, tolerance, store, prefix=prefix)
        except WebhookRejected as exc:
            raise HTTPException(status_code=401, detail=exc.reason) from None

    return dependency
