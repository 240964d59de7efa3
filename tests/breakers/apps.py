"""The App that worker processes run in the limit tests (``tests.breakers.apps:app``)."""

from __future__ import annotations

import os
import time
from typing import Any

import durq

app = durq.App()


@app.task(queue="limited")
def limited(seconds: float = 0.05) -> dict[str, Any]:
    """Report when it ran, so the test can count overlaps across processes."""
    started = time.time()
    time.sleep(seconds)
    return {"pid": os.getpid(), "started": started, "ended": time.time()}
