"""One validated settings class: every field reads ``NEXUS_<NAME>`` or ``.env`` (FR-028…031)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEFAULT_CORPUS_ROOT", "Settings", "get_settings"]

#: The small real text corpus shipped with the recipe.
DEFAULT_CORPUS_ROOT = Path(__file__).resolve().parent / "corpus"

# Dev-only defaults: a prod environment must set its own (see ``_no_dev_keys_in_prod``).
DEV_KEYS = {
    "viewer": "nexus-dev-viewer-key",
    "operator": "nexus-dev-operator-key",
    "researcher": "nexus-dev-researcher-key",
    "admin": "nexus-dev-admin-key",
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="NEXUS_", env_file=".env", extra="ignore", validate_default=True
    )

    app_name: str = "Nexus Babel Alexandria"
    environment: Literal["dev", "test", "prod"] = "dev"
    database_url: str = "sqlite:///nexus_babel.db"
    corpus_root: Path = DEFAULT_CORPUS_ROOT

    # feature flags, safe defaults (FR-031): RAW on, async on, ML off, shadow off
    raw_mode_enabled: bool = True
    async_jobs_enabled: bool = True
    plugin_ml_enabled: bool = False
    shadow_execution_enabled: bool = False
    plugin_profile: Literal["deterministic", "ml_first", "ml_only"] = "deterministic"

    bootstrap_viewer_key: SecretStr = SecretStr(DEV_KEYS["viewer"])
    bootstrap_operator_key: SecretStr = SecretStr(DEV_KEYS["operator"])
    bootstrap_researcher_key: SecretStr = SecretStr(DEV_KEYS["researcher"])
    bootstrap_admin_key: SecretStr = SecretStr(DEV_KEYS["admin"])

    # jobs and the worker
    job_max_attempts: int = Field(3, ge=1)
    job_idempotency_ttl_seconds: float = Field(365 * 24 * 3600, gt=0)
    worker_poll_seconds: float = Field(1.0, ge=0)
    worker_lease_seconds: float = Field(30.0, gt=0)
    # jobs one worker process runs at once (the seed ran one; more processes also scale)
    worker_concurrency: int = Field(1, ge=1, le=64)
    # execution_mode=sync: how many run at once in the API process, and how long a
    # request waits for its job before answering with the status so far
    sync_max_concurrency: int = Field(4, ge=1, le=64)
    sync_timeout_seconds: float = Field(10.0, gt=0)

    # US-INFRA-23: structured logs; "auto" is JSON lines unless stderr is a terminal, and
    # "off" leaves logging as the host process set it up
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "console", "json", "off"] = "auto"

    # per API key request budget (US-INFRA-21); 0 turns it off
    rate_limit_per_second: float = Field(50.0, ge=0)
    rate_limit_burst: int = Field(100, ge=1)

    @field_validator("database_url")
    @classmethod
    def _supported_url(cls, value: str) -> str:
        if not value.startswith(("sqlite:", "postgresql:", "postgres:")):
            raise ValueError(
                "NEXUS_DATABASE_URL must be sqlite:///path.db or "
                "postgresql://user:password@host:5432/dbname"
            )
        return value

    @field_validator("corpus_root")
    @classmethod
    def _corpus_is_a_folder(cls, value: Path) -> Path:
        # EC-16: a wrong corpus root stops the start, not the first ingestion
        if not value.is_dir():
            raise ValueError(
                f"NEXUS_CORPUS_ROOT={value} is not a folder; point it at the texts to ingest "
                f"(the recipe ships one at {DEFAULT_CORPUS_ROOT})"
            )
        return value

    @model_validator(mode="after")
    def _no_dev_keys_in_prod(self) -> Settings:
        if self.environment != "prod":
            return self
        for role, default in DEV_KEYS.items():
            if self.bootstrap_key(role).get_secret_value() == default:
                raise ValueError(
                    f"NEXUS_BOOTSTRAP_{role.upper()}_KEY still has its published dev default; "
                    "set a secret value before running with NEXUS_ENVIRONMENT=prod"
                )
        return self

    def bootstrap_key(self, role: str) -> SecretStr:
        value: SecretStr = getattr(self, f"bootstrap_{role}_key")
        return value

    @property
    def worker_poll_interval(self) -> float:
        """US-INFRA-09 / EC-10: never spin; poll at least every 0.1 s."""
        return max(self.worker_poll_seconds, 0.1)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
