"""What every route needs, built once per API instance and kept on ``api.state.durq``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fastapi import Request

from ..app import App
from ..settings import Settings
from .keys import KeyService
from .metrics import Metrics
from .ratelimit import RateLimiter

__all__ = ["Service", "get_service"]


@dataclass
class Service:
    app: App
    settings: Settings
    keys: KeyService
    limiter: RateLimiter
    metrics: Metrics
    _bootstrapped: bool = False
    _bootstrap_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, app: App, settings: Settings) -> Service:
        return cls(
            app=app,
            settings=settings,
            keys=KeyService(app, settings),
            limiter=RateLimiter(settings.api_rate_limit_per_second, settings.api_rate_limit_burst),
            metrics=Metrics(app),
        )

    def ensure_bootstrap(self) -> None:
        """Seed development keys once (at startup, or at the first request when this API
        is mounted in another app, whose lifespan does not run ours)."""
        if self._bootstrapped:
            return
        with self._bootstrap_lock:
            if not self._bootstrapped:
                self.keys.ensure_bootstrap()
                self._bootstrapped = True

    @property
    def page_cap(self) -> int:
        return self.settings.api_max_page_size

    def page_size(self, requested: int) -> int:
        return min(requested, self.page_cap)


def get_service(request: Request) -> Service:
    service: Service = request.app.state.durq
    return service
