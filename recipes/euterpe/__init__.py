"""Euterpe, the transcoding inbox/outbox service of seed 003, rebuilt on durq's public API."""

from .api import create_app
from .config import Settings
from .service import Euterpe, durq_app, worker_app

__all__ = ["Euterpe", "Settings", "create_app", "durq_app", "worker_app"]
