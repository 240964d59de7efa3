"""Dashboard sessions: a signed cookie naming an API key, and the CSRF token bound to it.

The login form exchanges an API key for a cookie holding ``key_id.expiry.nonce.signature``
(HMAC-SHA256 under the session secret); the key itself never goes in the cookie. Every
request looks the key up again, so disabling a key or changing its role ends or changes
its sessions at once. The CSRF token of a session is an HMAC of its cookie: a page from
this server carries it in its forms, a page elsewhere cannot compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

__all__ = ["COOKIE_NAME", "CSRF_FIELD", "CSRF_HEADER", "Session", "SessionSigner"]

COOKIE_NAME = "durq_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"


@dataclass(frozen=True, slots=True)
class Session:
    key_id: str
    expires_at: float
    cookie: str


class SessionSigner:
    def __init__(self, secret: bytes | None, max_age: float) -> None:
        #: Without a configured secret, one per process: sessions end at a restart.
        self._secret = secret or secrets.token_bytes(32)
        self.max_age = max_age

    def _sign(self, message: str) -> str:
        return hmac.new(self._secret, message.encode(), hashlib.sha256).hexdigest()

    def issue(self, key_id: str, now: float | None = None) -> Session:
        expires = int((time.time() if now is None else now) + self.max_age)
        body = f"{key_id}.{expires}.{secrets.token_hex(8)}"
        return Session(key_id, float(expires), f"{body}.{self._sign('session:' + body)}")

    def read(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session in ``cookie`` if it is ours and not expired, else ``None``."""
        if not cookie or len(cookie) > 512:
            return None
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, self._sign("session:" + body)):
            return None
        key_id, _, rest = body.partition(".")
        expires, _, _nonce = rest.partition(".")
        if not expires.isdigit() or float(expires) < (time.time() if now is None else now):
            return None
        return Session(key_id, float(expires), cookie)

    def csrf_token(self, session: Session) -> str:
        return self._sign("csrf:" + session.cookie)

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.csrf_token(session))
