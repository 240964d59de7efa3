"""Seed 004's calendar-sync worker rebuilt on durq's public API."""

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
