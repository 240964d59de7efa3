"""Webhook signatures: a fixed vector cross-checked with openssl, and every forgery refused."""

from __future__ import annotations

import hmac
import subprocess
from unittest import mock

import pytest

from durq.webhooks import MemoryNonceStore, Signer, WebhookRejected, sign, verify

SECRET = "whsec-vector"
TIMESTAMP = "1700000000"
NONCE = "3f2a9c0d5e7b41a8"
BODY = b'{"event_id":"0b4c","type":"job.succeeded"}'
#: hex HMAC-SHA256(SECRET, TIMESTAMP + "." + NONCE + "." + BODY)
EXPECTED = "7e094814eea1417f2d2ed30769e773ee7953cb67363083f045e2678d5ea5c51e"


def openssl_hmac(secret: str, message: bytes) -> str:
    out = subprocess.run(
        ["openssl", "dgst", "-sha256", "-hmac", secret],
        input=message,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return out.strip().split("= ")[-1]


def test_signature_matches_openssl_vector() -> None:
    message = f"{TIMESTAMP}.{NONCE}.".encode() + BODY
    digest = sign(SECRET, TIMESTAMP, NONCE, BODY)
    assert digest == openssl_hmac(SECRET, message)
    assert digest == EXPECTED
    headers = Signer({"*": [SECRET]}, prefix="x-euterpe").headers(
        None, BODY, "0b4c", now=int(TIMESTAMP), nonce=NONCE
    )
    assert headers["x-euterpe-signature"] == EXPECTED
    assert headers["x-euterpe-timestamp"] == TIMESTAMP
    assert headers["x-euterpe-nonce"] == NONCE
    assert headers["x-euterpe-event-id"] == "0b4c"


def signed(
    now: float, nonce: str = NONCE, body: bytes = BODY, secrets: list[str] | None = None
) -> dict[str, str]:
    return Signer({"*": secrets or [SECRET]}).headers(None, body, "evt-1", now=now, nonce=nonce)


def test_signature_rejects_forged_stale_replayed_or_changed() -> None:
    now = 1_700_000_000.0
    store = MemoryNonceStore()
    ok = verify(signed(now), BODY, [SECRET], nonce_store=store, now=now)
    assert ok.event_id == "evt-1"

    def rejected(headers: dict[str, str], body: bytes = BODY, at: float = now) -> str:
        with pytest.raises(WebhookRejected) as info:
            verify(headers, body, [SECRET], nonce_store=store, now=at)
        return info.value.reason

    forged = signed(now, nonce="n-forged") | {"x-durq-signature": "0" * 64}
    assert "signature" in rejected(forged)
    other_key = signed(now, nonce="n-other", secrets=["not-the-secret"])
    assert "signature" in rejected(other_key)
    assert "window" in rejected(signed(now - 301, nonce="n-stale"))
    assert "window" in rejected(signed(now + 301, nonce="n-future"))
    assert verify(signed(now - 299, nonce="n-edge"), BODY, [SECRET], now=now)
    changed = BODY[:-2] + b"X}"
    assert "signature" in rejected(signed(now, nonce="n-body"), changed)
    assert "replay" in rejected(signed(now))  # the first request's nonce, again
    assert "missing" in rejected({})

    # Rotation: a request signed with both secrets passes a receiver that knows either.
    both = signed(now, nonce="n-rot", secrets=["new-secret", SECRET])
    assert "," in both["x-durq-signature"]
    assert verify(both, BODY, ["new-secret"], now=now)
    assert verify(both, BODY, [SECRET], now=now)

    # The comparison is constant-time: hmac.compare_digest decides every match.
    with mock.patch("durq.webhooks.hmac.compare_digest", wraps=hmac.compare_digest) as spy:
        verify(signed(now, nonce="n-spy"), BODY, [SECRET], now=now)
    assert spy.call_count >= 1
