"""One validated settings class. Every field reads ``DURQ_<NAME>`` or ``.env``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "redact_url"]

DEFAULT_DATABASE_URL = "sqlite:///durq.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DURQ_", env_file=".env", extra="ignore", validate_default=True
    )

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="sqlite:///path.db or postgresql://user:pass@host:port/db",
    )
    env: Literal["dev", "test", "prod"] = "prod"

    # enqueue
    default_queue: str = "default"
    default_max_attempts: int = Field(20, ge=1)
    idempotency_ttl_seconds: float = Field(24 * 3600, gt=0)

    # worker
    queues: str = "default"
    concurrency: int = Field(10, ge=1, le=1000)
    processes: int = Field(1, ge=1, le=64)
    poll_interval: float = Field(1.0, ge=0)
    lease_seconds: float = Field(30.0, gt=0)
    heartbeat_seconds: float = Field(10.0, gt=0)
    shutdown_timeout: float = Field(30.0, ge=0)
    listen_notify: bool = True

    # maintenance retention
    prune_succeeded_seconds: float = Field(24 * 3600, ge=0)
    prune_dead_letter_seconds: float = Field(7 * 24 * 3600, ge=0)
    prune_cancelled_seconds: float = Field(7 * 24 * 3600, ge=0)

    # health guardrails (seed 000 d-003)
    degraded_p95_age_seconds: float = Field(900, gt=0)
    degraded_ready_count: int = Field(500, gt=0)

    # SQLite durability: FULL survives power loss in WAL mode, NORMAL only process crashes
    sqlite_synchronous: Literal["FULL", "NORMAL", "OFF"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(30_000, ge=0)

    # PostgreSQL connection pool
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(10, ge=1)

    @field_validator("database_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value.startswith(("sqlite:", "postgresql:", "postgres:", "postgresql+psycopg:")):
            raise ValueError(
                f"unsupported database URL {redact_url(value)!r}: use sqlite:///path.db "
                "or postgresql://user:password@host:5432/dbname"
            )
        return value

    @field_validator("poll_interval")
    @classmethod
    def _clamp_poll(cls, value: float) -> float:
        # Seed 002 US-INFRA-09: never spin; poll at least every 0.1 s.
        return max(value, 0.1)


def redact_url(url: str) -> str:
    """``postgresql://u:secret@h/db`` → ``postgresql://u:***@h/db``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    if ":" in creds:
        user = creds.split(":", 1)[0]
        creds = f"{user}:***"
    return f"{scheme}://{creds}@{host}"
