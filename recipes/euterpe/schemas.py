"""The request bodies of Euterpe's HTTP API (strict: unknown fields are refused)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = ["CredentialsPush", "StorageCredentials", "TranscodeRequest"]

BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObjectRef(_Strict):
    bucket: str = Field(pattern=BUCKET)
    key: str = Field(min_length=1, max_length=1024)


class OutputRef(_Strict):
    bucket: str = Field(pattern=BUCKET)
    prefix: str = Field("", max_length=900)


class Rendition(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    format: Literal["mp3", "ogg", "aac", "flac", "wav"]
    bitrate: str | None = Field(None, pattern=r"^[0-9]{1,4}k$")


class StorageCredentials(_Strict):
    """Short-lived, scoped S3 credentials: read the source, write the output prefix."""

    access_key_id: str = Field(min_length=1, max_length=256)
    secret_access_key: SecretStr = Field(min_length=1, max_length=256)
    session_token: SecretStr | None = Field(None, max_length=4096)

    def plain(self) -> dict[str, str]:
        values = {
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key.get_secret_value(),
        }
        if self.session_token is not None:
            values["session_token"] = self.session_token.get_secret_value()
        return values


class TranscodeRequest(_Strict):
    idempotency_key: str = Field(min_length=1, max_length=255)
    source: ObjectRef
    output: OutputRef
    renditions: list[Rendition] = Field(min_length=1, max_length=10)
    storage_credentials: StorageCredentials
    status_webhook_url: str | None = Field(None, max_length=2048)
    refresh_url: str | None = Field(None, max_length=2048)

    @field_validator("renditions")
    @classmethod
    def _distinct_names(cls, value: list[Rendition]) -> list[Rendition]:
        names = [r.name for r in value]
        if len(set(names)) != len(names):
            raise ValueError(f"rendition names must be distinct, got {names}")
        return value

    def job_args(self) -> dict[str, Any]:
        return {
            "source": self.source.model_dump(),
            "output": self.output.model_dump(),
            "renditions": [r.model_dump(exclude_none=True) for r in self.renditions],
        }

    def request_hash(self) -> str:
        """SHA-256 of the request without its key and credentials: a retry carrying
        refreshed credentials is still the same request."""
        shape = self.model_dump(mode="json", exclude={"idempotency_key", "storage_credentials"})
        canonical = json.dumps(shape, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


class CredentialsPush(_Strict):
    """New credentials for a job, from the requester (its refresh URL's answer)."""

    job_id: int = Field(ge=1)
    credential_version: int = Field(ge=1, description="the version the worker reported")
    storage_credentials: StorageCredentials
