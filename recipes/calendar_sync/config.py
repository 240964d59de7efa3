"""One validated settings class: every field reads ``CALSYNC_<NAME>`` or ``.env``."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEV_ADMIN_PASSWORD", "DEV_SESSION_SECRET", "Settings"]

# Published dev defaults: a prod environment must set its own (``_no_dev_secrets_in_prod``).
DEV_ADMIN_PASSWORD = "calsync-dev-admin-password"
DEV_SESSION_SECRET = "calsync-dev-session-secret-change-me"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CALSYNC_", env_file=".env", extra="ignore", validate_default=True
    )

    environment: Literal["dev", "test", "prod"] = "dev"
    database_url: str = "sqlite:///calendar_sync.db"

    # the admin who may schedule jobs (POST /auth/session), and an optional read-only user
    admin_email: str = "admin@example.com"
    admin_password: SecretStr = SecretStr(DEV_ADMIN_PASSWORD)
    viewer_email: str | None = None
    viewer_password: SecretStr | None = None
    session_secret: SecretStr = SecretStr(DEV_SESSION_SECRET)
    session_ttl_seconds: int = Field(8 * 3600, ge=60)
    # Secure cookies need HTTPS; the dev server speaks plain HTTP.
    cookie_secure: bool = False

    # sync jobs: the seed's retry policy and circuit breaker
    max_retries: int = Field(5, ge=0, le=50)
    backoff_base_seconds: float = Field(60.0, gt=0)
    backoff_cap_seconds: float = Field(1800.0, gt=0)
    backoff_jitter: float = Field(0.1, ge=0, lt=1)
    breaker_threshold: int = Field(5, ge=1)
    breaker_pause_seconds: float = Field(1800.0, gt=0)
    # a schedule request without connectorId syncs through this connector
    default_connector_id: UUID = UUID("00000000-0000-0000-0000-000000000001")
    # a window longer than this is split into several jobs
    max_window_seconds: int = Field(24 * 3600, ge=60)

    # the fake provider the worker uses unless another executor is plugged in: pairs
    # (comma-separated ids) whose syncs fail, and how long each sync takes
    fake_fail_pairs: str = ""
    fake_sync_seconds: float = Field(0.0, ge=0, le=60)

    # the worker
    worker_concurrency: int = Field(4, ge=1, le=100)
    worker_poll_seconds: float = Field(0.5, ge=0.1)

    @field_validator("database_url")
    @classmethod
    def _supported_url(cls, value: str) -> str:
        if not value.startswith(("sqlite:", "postgresql:", "postgres:")):
            raise ValueError(
                "CALSYNC_DATABASE_URL must be sqlite:///path.db or "
                "postgresql://user:password@host:5432/dbname"
            )
        return value

    @model_validator(mode="after")
    def _no_dev_secrets_in_prod(self) -> Settings:
        if self.environment != "prod":
            return self
        if self.admin_password.get_secret_value() == DEV_ADMIN_PASSWORD:
            raise ValueError(
                "CALSYNC_ADMIN_PASSWORD still has its published dev default; set a secret "
                "value before running with CALSYNC_ENVIRONMENT=prod"
            )
        if self.session_secret.get_secret_value() == DEV_SESSION_SECRET:
            raise ValueError(
                "CALSYNC_SESSION_SECRET still has its published dev default; set a random "
                "value (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        return self

    @property
    def failing_pairs(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.fake_fail_pairs.split(",") if p.strip())
