"""API keys stored as SHA-256 hashes, the role ladder and the RAW mode gate (FR-001…006)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import or_, select, update

from .config import Settings
from .db import ApiKey, DBManager, utcnow

__all__ = [
    "BOOTSTRAP_KEYS",
    "ROLE_ORDER",
    "AuthContext",
    "AuthService",
    "hash_api_key",
    "mode_allows",
    "role_allows",
]

ROLE_ORDER = {"viewer": 1, "operator": 2, "researcher": 3, "admin": 4}

#: (owner, role, raw_mode_enabled) of the four keys seeded at start-up (US-INFRA-03).
BOOTSTRAP_KEYS = (
    ("dev-viewer", "viewer", False),
    ("dev-operator", "operator", False),
    ("dev-researcher", "researcher", True),
    ("dev-admin", "admin", True),
)


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def role_allows(role: str, minimum: str) -> bool:
    return ROLE_ORDER.get(role, 0) >= ROLE_ORDER[minimum]


def mode_allows(settings: Settings, ctx: AuthContext, mode: str) -> bool:
    """PUBLIC for everyone; RAW only if the platform, the key and the role all allow it."""
    if mode.upper() != "RAW":
        return True
    return (
        settings.raw_mode_enabled and ctx.raw_mode_enabled and role_allows(ctx.role, "researcher")
    )


@dataclass(frozen=True, slots=True)
class AuthContext:
    api_key_id: str
    owner: str
    role: str
    raw_mode_enabled: bool

    def allowed_modes(self, settings: Settings) -> list[str]:
        return ["PUBLIC", "RAW"] if mode_allows(settings, self, "RAW") else ["PUBLIC"]


class AuthService:
    def __init__(self, db: DBManager) -> None:
        self.db = db

    def ensure_default_api_keys(self, settings: Settings) -> None:
        """Seed the bootstrap keys; on restart re-enable them and refresh their RAW flag
        instead of adding duplicates (matched by ``key_hash``)."""
        with self.db.session() as session, session.begin():
            for owner, role, raw in BOOTSTRAP_KEYS:
                key_hash = hash_api_key(settings.bootstrap_key(role).get_secret_value())
                row = session.scalar(select(ApiKey).where(ApiKey.key_hash == key_hash))
                if row is None:
                    session.add(
                        ApiKey(key_hash=key_hash, owner=owner, role=role, raw_mode_enabled=raw)
                    )
                else:
                    row.enabled = True
                    row.raw_mode_enabled = raw

    def create_key(self, key: str, *, owner: str, role: str, raw_mode_enabled: bool) -> str:
        if role not in ROLE_ORDER:
            raise ValueError(f"unknown role {role!r}; use one of {list(ROLE_ORDER)}")
        with self.db.session() as session, session.begin():
            row = ApiKey(
                key_hash=hash_api_key(key),
                owner=owner,
                role=role,
                raw_mode_enabled=raw_mode_enabled,
            )
            session.add(row)
            session.flush()
            return row.id

    def authenticate(self, key: str | None) -> AuthContext | None:
        """The enabled key's context (its ``last_used_at`` stamped), else None. An empty
        key hashes like any other and matches nothing (EC-01)."""
        if key is None:
            return None
        with self.db.session() as session:
            row = session.scalar(
                select(ApiKey).where(ApiKey.key_hash == hash_api_key(key), ApiKey.enabled.is_(True))
            )
            if row is None:
                return None
            ctx = AuthContext(row.id, row.owner, row.role, row.raw_mode_enabled)
        self._stamp_last_used(ctx.api_key_id)
        return ctx

    def _stamp_last_used(self, api_key_id: str) -> None:
        """EC-03: one guarded UPDATE rather than read-modify-write, so concurrent requests
        with one key never fail on a stale read and a late writer never moves the stamp
        back in time."""
        now = utcnow()
        with self.db.session() as session, session.begin():
            session.execute(
                update(ApiKey)
                .where(
                    ApiKey.id == api_key_id,
                    or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < now),
                )
                .values(last_used_at=now)
            )
