"""The App that worker subprocesses of these tests run (``--app tests.outbox.apps:app``)."""

from __future__ import annotations

from typing import Any

import durq

app = durq.App()


@app.task(retry=durq.Fixed([0]), max_attempts=3)
def noop(n: int = 0) -> dict[str, Any]:
    return {"n": n}
