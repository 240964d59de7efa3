"""``App``'s operations on keys: circuit breakers, per-key limits and alerts."""

from __future__ import annotations

from typing import Any

from ._drivers import Driver
from ._engine import keyed
from .errors import KeyNotFound, ValidationError
from .keys import Alert, Breaker, BreakerRule, Limit, LimitState, rule_for
from .registry import TaskRegistry
from .settings import Settings

__all__ = ["ALERT_STATES", "KeyOperations"]

ALERT_STATES = ("open", "resolved", "all")


class KeyOperations(TaskRegistry):
    """Breaker rules and limits by key pattern (``fnmatch``; an exact key wins):

    ``app.breakers["connector-*"] = BreakerRule(threshold=3, pause=600)``;
    ``app.limits["tenant-*"] = Limit(concurrency=2, rate=10, per=60)``.
    Keys no breaker rule matches use ``DURQ_BREAKER_THRESHOLD`` and
    ``DURQ_BREAKER_PAUSE_SECONDS`` (5 failures, 30 minutes).
    """

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.breakers: dict[str, BreakerRule] = {}
        self.limits: dict[str, Limit] = {}

    @property
    def driver(self) -> Driver:
        raise NotImplementedError

    def _breaker_rule(self, key: str) -> BreakerRule:
        default = self._default_breaker()
        return rule_for(key, self.breakers, default) or default

    def _default_breaker(self) -> BreakerRule:
        # Built once per settings: every enqueue asks for it, and building validates.
        wanted = (self.settings.breaker_threshold, self.settings.breaker_pause_seconds)
        cached: BreakerRule | None = self.__dict__.get("_default_breaker_rule")
        if cached is None or (cached.threshold, cached.pause) != wanted:
            cached = self.__dict__["_default_breaker_rule"] = BreakerRule(*wanted)
        return cached

    def _limit_for(self, key: str) -> Limit | None:
        return rule_for(key, self.limits, None)

    # ---- breakers ----------------------------------------------------------------------

    def list_breakers(self, *, failing_only: bool = False, limit: int = 200) -> list[Breaker]:
        """Breakers, open ones first (``failing_only``: those counting failures or open)."""
        with self.driver.read() as ex:
            return self.driver.breaker_list(ex, failing_only=failing_only, limit=limit)

    def get_breaker(self, key: str) -> Breaker:
        with self.driver.read() as ex:
            found = self.driver.breaker_lock(ex, key)
        if found is None:
            raise KeyNotFound(_no_breaker(key))
        return found

    def reset_breaker(self, key: str) -> Breaker:
        """Close ``key`` now: count 0, its parked jobs due, its alert resolved."""
        with self.driver.transaction() as ex:
            found = keyed.reset_breaker(self.driver, ex, key)
        if found is None:
            raise KeyNotFound(_no_breaker(key))
        return found

    # ---- limits ------------------------------------------------------------------------

    def list_limits(self, *, limit: int = 200) -> list[LimitState]:
        with self.driver.read() as ex:
            return self.driver.limit_list(ex, limit)

    # ---- alerts ------------------------------------------------------------------------

    def list_alerts(self, *, state: str = "open", limit: int = 200) -> list[Alert]:
        if state not in ALERT_STATES:
            raise ValidationError(f"unknown alert state {state!r}; use one of: open, resolved, all")
        with self.driver.read() as ex:
            return self.driver.alert_list(ex, state=state, limit=limit)

    def ack_alert(self, alert_id: int) -> Alert:
        """Mark an alert seen (it stays open until its cause clears)."""
        with self.driver.transaction() as ex:
            found = self.driver.alert_ack(ex, int(alert_id))
        if found is None:
            raise KeyNotFound(f"alert {alert_id} does not exist; list them with `durq alerts`")
        return found

    def open_alert(self, category: str, key: str) -> dict[str, Any] | None:
        with self.driver.read() as ex:
            found = self.driver.alert_open(ex, category=category, key=key)
        return found.to_dict() if found else None


def _no_breaker(key: str) -> str:
    return f"no circuit breaker {key!r}; list them with `durq breakers list`"
