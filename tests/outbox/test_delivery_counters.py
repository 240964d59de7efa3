"""Each delivery process counts its own requests: attempted, succeeded (2xx), failed."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

import durq

from ..waiting import wait_until
from .receiver import Receiver, serving
from .test_outbox import delivering


def test_delivery_process_counts_attempts_successes_and_failures(
    outbox_app: Callable[..., durq.App], caplog: pytest.LogCaptureFixture
) -> None:
    receiver = Receiver(fail_times=2)
    app = outbox_app(webhook_backoff_base=0.05, webhook_backoff_cap=0.1)
    with serving(receiver) as url:
        job = app.enqueue("noop", {"n": 1}, webhook_url=url)
        app.run_job(job.id)  # three events: queued, running, succeeded
        with caplog.at_level(logging.INFO, logger="durq.deliver"), delivering(app) as worker:
            wait_until(
                lambda: worker.deliverer.stats()["outcomes"].get("delivered") == 3,
                timeout=30,
                what="three events delivered",
            )
            stats = worker.deliverer.stats()
    # each event: two 503s, then a 2xx
    assert stats["attempted"] == sum(receiver.attempts.values()) == 9
    assert (stats["succeeded"], stats["failed"]) == (3, 6)
    assert stats["outcomes"] == {"retried": 6, "delivered": 3}
    stopped = [r.getMessage() for r in caplog.records if "stopped" in r.getMessage()]
    assert any("deliveries: 9 attempted, 3 succeeded, 6 failed" in m for m in stopped), stopped
