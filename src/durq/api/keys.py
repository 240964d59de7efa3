"""API keys: made once, stored only as SHA-256 hashes, checked in constant time.

Used by the HTTP service and by ``durq keys``. A key is shown once, when it is created;
afterwards only its id, owner and role are known.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta

import structlog

from .._drivers import ApiKey
from ..app import App
from ..errors import ConfigurationError, ValidationError
from ..settings import Settings

__all__ = ["ApiKey", "KeyService", "hash_key"]

log = structlog.get_logger("durq.api")

KEY_PREFIX = "durq_"
MAX_OWNER_LENGTH = 128
# Write last_used_at at most this often per key: reads stay reads under load.
TOUCH_INTERVAL = timedelta(seconds=60)


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def _new_key_id() -> str:
    return "key_" + secrets.token_hex(8)


class KeyService:
    def __init__(self, app: App, settings: Settings | None = None) -> None:
        self.app = app
        self.settings = settings or app.settings

    @property
    def roles(self) -> tuple[str, ...]:
        return self.settings.role_ladder

    def check_role(self, role: str) -> str:
        if role not in self.roles:
            raise ValidationError(
                f"unknown role {role!r}; use one of {', '.join(self.roles)} "
                "(the ladder is DURQ_API_ROLES, lowest first)"
            )
        return role

    @staticmethod
    def check_owner(owner: str) -> str:
        if not owner or owner != owner.strip() or len(owner) > MAX_OWNER_LENGTH:
            raise ValidationError(
                f"invalid owner {owner!r}: a non-empty name of at most {MAX_OWNER_LENGTH} "
                "characters without surrounding spaces, e.g. 'billing-service'"
            )
        return owner

    def create(self, owner: str, role: str) -> tuple[ApiKey, str]:
        """A new key: ``(record, plaintext)``. The plaintext is not stored anywhere."""
        self.check_owner(owner)
        self.check_role(role)
        plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
        backend = self.app.driver
        with backend.transaction() as ex:
            key = backend.key_insert(
                ex,
                key_id=_new_key_id(),
                owner=owner,
                role=role,
                key_hash=hash_key(plaintext),
            )
        return key, plaintext

    def list_keys(self, *, after_id: str | None = None, limit: int = 100) -> list[ApiKey]:
        backend = self.app.driver
        with backend.read() as ex:
            return backend.key_list(ex, after_id=after_id, limit=limit)

    def get(self, key_id: str) -> ApiKey | None:
        backend = self.app.driver
        with backend.read() as ex:
            return backend.key_get(ex, key_id)

    def disable(self, key_id: str) -> ApiKey | None:
        """Disable a key for good (idempotent); ``None`` if there is no such key."""
        backend = self.app.driver
        with backend.transaction() as ex:
            return backend.key_disable(ex, key_id)

    def authenticate(self, plaintext: str) -> ApiKey | None:
        """The key's record (possibly disabled), or ``None`` for a key durq never issued."""
        digest = hash_key(plaintext)
        backend = self.app.driver
        with backend.read() as ex:
            found = backend.key_by_hash(ex, digest)
        if found is None:
            return None
        key, stored = found
        if not hmac.compare_digest(stored, digest):
            return None
        now = datetime.now(UTC)
        if not key.disabled and (
            key.last_used_at is None or now - key.last_used_at >= TOUCH_INTERVAL
        ):
            with backend.transaction() as ex:
                backend.key_touch(ex, key.id)
        return key

    def bootstrap_plaintexts(self) -> dict[str, str]:
        """role → development key: DURQ_API_BOOTSTRAP_KEYS, else ``dev-<role>-key``."""
        return dict(self.settings.api_bootstrap_keys) or {
            role: f"dev-{role}-key" for role in self.roles
        }

    def is_development_key(self, plaintext: str) -> bool:
        """A bootstrap key: refused outside DURQ_ENV=dev even if a dev database kept it."""
        defaults = [f"dev-{role}-key" for role in self.roles]
        known = [*self.settings.api_bootstrap_keys.values(), *defaults]
        return any(hmac.compare_digest(plaintext.encode(), k.encode()) for k in known)

    def ensure_bootstrap(self) -> list[ApiKey]:
        """Seed development keys (one per role) when DURQ_ENV=dev; never otherwise.

        Keys come from DURQ_API_BOOTSTRAP_KEYS (JSON: role → key), by default
        ``dev-<role>-key`` owned by ``dev-<role>``. Re-running re-enables them.
        """
        wanted = self.settings.api_bootstrap_keys
        if self.settings.env != "dev":
            if wanted:
                log.warning(
                    "bootstrap_keys_ignored",
                    env=self.settings.env,
                    reason="development keys are seeded only when DURQ_ENV=dev",
                )
            return []
        wanted = self.bootstrap_plaintexts()
        seeded = []
        backend = self.app.driver
        with backend.transaction() as ex:
            for role, plaintext in wanted.items():
                if role not in self.roles:
                    raise ConfigurationError(
                        f"DURQ_API_BOOTSTRAP_KEYS names role {role!r}, which is not in "
                        f"DURQ_API_ROLES {list(self.roles)}"
                    )
                seeded.append(
                    backend.key_bootstrap(
                        ex,
                        key_id=_new_key_id(),
                        owner=f"dev-{role}",
                        role=role,
                        key_hash=hash_key(plaintext),
                    )
                )
        log.info("bootstrap_keys_seeded", roles=[k.role for k in seeded])
        return seeded
