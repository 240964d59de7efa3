"""Object storage over the S3 API (boto3): AWS itself, or any S3-compatible server.

Each job carries its own short-lived, scoped credentials (read the source, write the output
prefix) as durq job secrets; a client is made per attempt from them. A refusal (401/403)
comes back as botocore's ``ClientError``, which ``durq.http_classifier`` turns into a
credential refresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]

from .config import Settings

__all__ = ["Storage"]


class Storage:
    def __init__(self, settings: Settings, credentials: dict[str, Any]) -> None:
        self._client = boto3.client(
            "s3",
            endpoint_url=settings.s3_endpoint_url,
            region_name=settings.s3_region,
            aws_access_key_id=credentials.get("access_key_id"),
            aws_secret_access_key=credentials.get("secret_access_key"),
            aws_session_token=credentials.get("session_token"),
            # botocore's own retries would hide a 403 behind its backoff: durq retries
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1, "mode": "standard"},
            ),
        )

    def size(self, bucket: str, key: str) -> int:
        return int(self._client.head_object(Bucket=bucket, Key=key)["ContentLength"])

    def download(self, bucket: str, key: str, path: Path) -> None:
        self._client.download_file(bucket, key, str(path))

    def upload(self, path: Path, bucket: str, key: str, content_type: str) -> None:
        self._client.upload_file(str(path), bucket, key, ExtraArgs={"ContentType": content_type})
