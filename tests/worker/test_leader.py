"""The leader lease: one holder at a time, renewed by its holder, taken over once expired."""

from __future__ import annotations

import time
from collections.abc import Callable

import durq
from durq._maintenance.leader import LeaderLease

from .support import wait_until


def test_one_leader_at_a_time_and_takeover_after_expiry(
    make_app: Callable[..., durq.App],
) -> None:
    a, b = make_app(), make_app()
    first = LeaderLease(a.driver, "maintenance", "worker-a", ttl=0.6)
    second = LeaderLease(b.driver, "maintenance", "worker-b", ttl=0.6)
    assert first.hold() is True
    assert second.hold() is False
    assert second.current() == "worker-a"

    # The holder renews and keeps it; the other waits a third of the lease between tries.
    wait_until(lambda: time.monotonic() > first._held_until - first.ttl / 3, what="renewal due")
    assert first.hold() is True and second.current() == "worker-a"

    # worker-a stops renewing (it died): once its lease expires, worker-b takes over.
    wait_until(second.hold, timeout=10, what="worker-b to take over the expired lease")
    assert second.current() == "worker-b"
    first._held_until = 0.0  # worker-a wakes up: it must find it no longer leads
    first._next_try = 0.0
    assert first.hold() is False


def test_release_hands_the_role_over_at_once(make_app: Callable[..., durq.App]) -> None:
    a, b = make_app(), make_app()
    first = LeaderLease(a.driver, "maintenance", "worker-a", ttl=30)
    second = LeaderLease(b.driver, "maintenance", "worker-b", ttl=30)
    assert first.hold() and not second.hold()
    first.release()
    assert first.current() is None
    second._next_try = 0.0
    assert second.hold() is True
