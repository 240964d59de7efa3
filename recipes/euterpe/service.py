"""Euterpe's parts wired together: its settings, the durq App its jobs live in, its table."""

from __future__ import annotations

from typing import Any

import durq

from .config import HEADER_PREFIX, Settings
from .store import Store
from .tasks import register_tasks

__all__ = ["Euterpe", "durq_app", "worker_app"]


def durq_app(settings: Settings) -> durq.App:
    """A durq App on Euterpe's database, its webhooks signed with ``x-euterpe-*`` headers
    (the other durq settings, signing secrets and KEKs included, come from ``DURQ_*``)."""
    own = durq.Settings(database_url=settings.database_url, webhook_header_prefix=HEADER_PREFIX)
    app = durq.App(settings=own)
    register_tasks(app, settings)
    return app


def worker_app() -> durq.App:
    """For ``durq worker --app recipes.euterpe:worker_app``: settings from the environment."""
    return durq_app(Settings())


class Euterpe:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = durq_app(settings)
        self.store = Store(settings.database_url)

    def start(self) -> None:
        self.app.migrate()
        self.store.create_tables()

    def close(self) -> None:
        self.store.close()
        self.app.close()

    def __enter__(self) -> Euterpe:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
