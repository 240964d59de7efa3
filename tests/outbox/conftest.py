from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durq
from durq.settings import Settings

from .receiver import SECRET

FAST = {
    "webhook_secrets": {"*": [SECRET]},
    "webhook_backoff_base": 0.1,
    "webhook_backoff_cap": 0.5,
    "webhook_poll_min": 0.05,
    "webhook_poll_max": 0.15,
}


def env_for(**extra: Any) -> dict[str, str]:
    """``DURQ_*`` variables for worker subprocesses: the fast delivery settings."""
    values = {**FAST, **extra}
    return {
        f"DURQ_{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in values.items()
    }


@pytest.fixture
def outbox_app(db_url: str) -> Iterator[Callable[..., durq.App]]:
    apps: list[durq.App] = []

    def make(**overrides: Any) -> durq.App:
        app = durq.App(settings=Settings(database_url=db_url, **{**FAST, **overrides}))
        app.task(name="noop", retry=durq.Fixed([0]), max_attempts=3)(lambda n=0: {"n": n})
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
