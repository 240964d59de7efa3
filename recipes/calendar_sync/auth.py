"""Admin sessions: the ``syn_session`` cookie and its CSRF token.

``POST /auth/session`` checks the credentials and sets ``syn_session``, an HttpOnly cookie
holding a signed, expiring session (HMAC-SHA256 with ``CALSYNC_SESSION_SECRET``; nothing
is stored server side). The session carries a random CSRF token, returned in the login
response (and in the readable ``syn_csrf`` cookie); every state-changing request must echo
it in ``X-CSRF-Token``. A cross-site form can send the cookie but cannot read the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from .config import Settings

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "Session",
    "check_credentials",
    "issue_session",
    "read_session",
]

SESSION_COOKIE = "syn_session"
CSRF_COOKIE = "syn_csrf"
CSRF_HEADER = "X-CSRF-Token"


@dataclass(frozen=True)
class Session:
    email: str
    role: str
    csrf: str
    expires_at: int

    def csrf_matches(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.csrf.encode())


def check_credentials(settings: Settings, email: str, password: str) -> str | None:
    """The role of these credentials (``admin`` or ``viewer``), or None."""
    users = [(settings.admin_email, settings.admin_password.get_secret_value(), "admin")]
    if settings.viewer_email and settings.viewer_password is not None:
        users.append((settings.viewer_email, settings.viewer_password.get_secret_value(), "viewer"))
    role = None
    for user_email, user_password, user_role in users:
        # Compare every entry in constant time, so timing tells nothing about which matched.
        same_email = hmac.compare_digest(email.encode(), user_email.encode())
        same_password = hmac.compare_digest(password.encode(), user_password.encode())
        if same_email and same_password:
            role = user_role
    return role


def issue_session(settings: Settings, email: str, role: str) -> tuple[str, Session]:
    """A new session and its signed cookie value."""
    session = Session(
        email=email,
        role=role,
        csrf=secrets.token_urlsafe(32),
        expires_at=int(time.time()) + settings.session_ttl_seconds,
    )
    body = json.dumps(
        {"email": email, "role": role, "csrf": session.csrf, "exp": session.expires_at},
        separators=(",", ":"),
    ).encode()
    encoded = base64.urlsafe_b64encode(body).decode().rstrip("=")
    return f"{encoded}.{_sign(settings, encoded)}", session


def read_session(settings: Settings, cookie: str | None) -> Session | None:
    """The session in a cookie if its signature is right and it has not expired."""
    if not cookie or "." not in cookie:
        return None
    encoded, _, signature = cookie.rpartition(".")
    if not hmac.compare_digest(signature, _sign(settings, encoded)):
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        session = Session(
            email=str(data["email"]),
            role=str(data["role"]),
            csrf=str(data["csrf"]),
            expires_at=int(data["exp"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return session if session.expires_at > time.time() else None


def _sign(settings: Settings, encoded: str) -> str:
    key = settings.session_secret.get_secret_value().encode()
    digest = hmac.new(key, encoded.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
