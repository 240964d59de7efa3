"""Opaque cursors for keyset pagination.

A job cursor encodes the last id of the page: the next page holds older ids only, so jobs
inserted meanwhile (always newer ids) never shift or repeat items.
"""

from __future__ import annotations

import base64
import binascii

from .errors import ApiError

__all__ = ["bad_cursor", "decode_cursor", "decode_job_cursor", "encode_cursor"]

MAX_CURSOR_LENGTH = 200


def encode_cursor(kind: str, position: str | int) -> str:
    raw = f"{kind}:{position}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str) -> str:
    """The position inside a cursor of ``kind``; 400 E_BAD_CURSOR for anything else."""
    try:
        if len(cursor) > MAX_CURSOR_LENGTH:
            raise ValueError
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii")).decode()
        found_kind, sep, position = raw.partition(":")
        if not sep or found_kind != kind or not position or "\x00" in position:
            raise ValueError
        return position
    except (ValueError, UnicodeError, binascii.Error):
        raise bad_cursor(cursor) from None


def decode_job_cursor(cursor: str) -> int:
    position = decode_cursor("j", cursor)
    if not position.isascii() or not position.isdigit() or len(position) > 21:
        raise bad_cursor(cursor)
    # Every id is below the cap, so a larger position means the same page as the cap.
    return min(int(position), 2**63 - 1)


def bad_cursor(cursor: str) -> ApiError:
    return ApiError(
        400,
        "E_BAD_CURSOR",
        f"cursor {cursor[:40]!r} is not one this API issued for this list; pass "
        "next_cursor from the previous page unchanged, or omit cursor to start at the newest",
    )
