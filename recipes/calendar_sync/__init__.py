"""Seed 004's calendar-sync worker rebuilt on durq's public API.

The names below load on first use, so ``python -m recipes.calendar_sync.seed`` (an HTTP
client) starts without importing the server, the worker or durq.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import create_app
    from .config import Settings
    from .executor import FakeProvider, ProviderError, SyncExecutor, SyncResult, SyncWindow
    from .service import CalendarSync, PairPaused, ScheduleRequest

__all__ = [
    "CalendarSync",
    "FakeProvider",
    "PairPaused",
    "ProviderError",
    "ScheduleRequest",
    "Settings",
    "SyncExecutor",
    "SyncResult",
    "SyncWindow",
    "create_app",
]

_HOME = {
    "create_app": "api",
    "Settings": "config",
    "FakeProvider": "executor",
    "ProviderError": "executor",
    "SyncExecutor": "executor",
    "SyncResult": "executor",
    "SyncWindow": "executor",
    "CalendarSync": "service",
    "PairPaused": "service",
    "ScheduleRequest": "service",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
