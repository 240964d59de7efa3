"""Nexus Babel platform infrastructure (seed 002) rebuilt on durq's public API."""

from .config import Settings, get_settings
from .main import create_app
from .platform import Platform

__all__ = ["Platform", "Settings", "create_app", "get_settings"]
