"""One validated settings class for Euterpe: every field reads ``EUTERPE_<NAME>`` or ``.env``.

durq's own settings (signing secrets per requester, key-encryption keys, worker tuning) stay
``DURQ_*``; see the README."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["GIB", "HEADER_PREFIX", "QUEUE", "Settings", "hash_api_key"]

GIB = 1024**3
#: The queue Euterpe's jobs run on and the prefix of its webhook headers (seed 003 §8).
QUEUE = "euterpe"
HEADER_PREFIX = "x-euterpe"


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="EUTERPE_", env_file=".env", extra="ignore", validate_default=True
    )

    database_url: str = "sqlite:///euterpe.db"
    # requester_id -> API key; only their SHA-256 hashes are kept in memory
    api_keys: dict[str, SecretStr] = Field(default_factory=dict)

    # the S3 API: None is AWS itself; a URL points at any S3-compatible server
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"

    # resource and disk safety (seed 003 §11)
    max_input_bytes: int = Field(2 * GIB, ge=1)
    # a source larger than this may not give an output above output_max_ratio times its size
    output_ratio_threshold_bytes: int = Field(GIB, ge=0)
    output_max_ratio: float = Field(2.0, gt=0)
    work_dir: Path | None = None  # temp inputs/outputs (default: the system temp dir)
    ffmpeg_binary: str = "ffmpeg"
    ffmpeg_timeout_seconds: float = Field(600.0, gt=0)

    # jobs
    max_attempts: int = Field(5, ge=1, le=100)
    idempotency_ttl_seconds: float = Field(24 * 3600, gt=0)

    @field_validator("database_url")
    @classmethod
    def _supported_url(cls, value: str) -> str:
        if not value.startswith(("sqlite:", "postgresql:", "postgres:")):
            raise ValueError(
                "EUTERPE_DATABASE_URL must be sqlite:///path.db or "
                "postgresql://user:password@host:5432/dbname"
            )
        return value

    def requester_for(self, api_key: str | None) -> str | None:
        """The requester an API key belongs to, or None (compared by hash)."""
        if not api_key:
            return None
        given = hash_api_key(api_key)
        found = None
        for requester, key in self.api_keys.items():
            # every key is compared, so timing says nothing about which one matched
            if hmac.compare_digest(hash_api_key(key.get_secret_value()), given):
                found = requester
        return found
