"""Request and response bodies (the seed's ``schemas/library.py`` names)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DefaultLibraryBackfillJobOut",
    "FromUrlRequest",
    "MediaOut",
    "RequeueDefaultLibraryBackfillJobRequest",
]


class RequeueDefaultLibraryBackfillJobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default_library_id: uuid.UUID
    source_library_id: uuid.UUID
    user_id: uuid.UUID


class DefaultLibraryBackfillJobOut(BaseModel):
    default_library_id: uuid.UUID
    source_library_id: uuid.UUID
    user_id: uuid.UUID
    status: Literal["pending", "running", "completed", "failed"]
    attempts: int
    last_error_code: str | None
    updated_at: datetime
    finished_at: datetime | None
    idempotent: bool
    enqueue_dispatched: bool


class FromUrlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str


class MediaOut(BaseModel):
    id: uuid.UUID
    kind: str
    title: str
    processing_status: str
    ingest_enqueued: bool
