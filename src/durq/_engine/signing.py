"""Signing webhook requests: HMAC-SHA256 over ``timestamp + "." + nonce + "." + raw_body``.

Headers (prefix configurable, ``x-durq`` by default): ``-signature`` (lowercase hex; during a
secret rotation one digest per valid secret, comma-separated, newest first), ``-timestamp``
(integer Unix seconds), ``-nonce`` (random, single use) and ``-event-id``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as random_source
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..settings import Settings

__all__ = ["DEFAULT_PREFIX", "Signer", "header_names", "sign", "signer_from_settings"]

DEFAULT_PREFIX = "x-durq"


def sign(secret: str | bytes, timestamp: str, nonce: str, body: bytes) -> str:
    """The lowercase hex HMAC-SHA256 of ``timestamp.nonce.body`` under ``secret``."""
    key = secret.encode() if isinstance(secret, str) else secret
    message = timestamp.encode() + b"." + nonce.encode() + b"." + body
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def header_names(prefix: str = DEFAULT_PREFIX) -> dict[str, str]:
    p = prefix.lower().rstrip("-")
    return {
        "signature": f"{p}-signature",
        "timestamp": f"{p}-timestamp",
        "nonce": f"{p}-nonce",
        "event_id": f"{p}-event-id",
    }


@dataclass(frozen=True)
class Signer:
    """Signs outgoing requests with the owner's secrets (``"*"``: everyone else's).

    Secrets are listed newest first; while a rotation overlaps, each is used, so a
    receiver that knows either one accepts the request."""

    secrets: Mapping[str, Sequence[str]] = field(repr=False)
    prefix: str = DEFAULT_PREFIX

    def secrets_for(self, owner: str | None) -> Sequence[str]:
        found = self.secrets.get(owner or "", None) or self.secrets.get("*", ())
        return found

    def headers(
        self,
        owner: str | None,
        body: bytes,
        event_id: str,
        *,
        now: float | None = None,
        nonce: str | None = None,
    ) -> dict[str, str]:
        names = header_names(self.prefix)
        timestamp = str(int(now if now is not None else time.time()))
        nonce = nonce or random_source.token_hex(16)
        digests = [sign(s, timestamp, nonce, body) for s in self.secrets_for(owner)]
        return {
            "content-type": "application/json",
            names["signature"]: ",".join(digests),
            names["timestamp"]: timestamp,
            names["nonce"]: nonce,
            names["event_id"]: event_id,
        }


def signer_from_settings(settings: Settings) -> Signer:
    """The signer ``DURQ_WEBHOOK_SECRETS`` and ``DURQ_WEBHOOK_HEADER_PREFIX`` describe."""
    owners = {
        owner: [s.get_secret_value() for s in values]
        for owner, values in settings.webhook_secrets.items()
    }
    return Signer(owners, settings.webhook_header_prefix)
