"""The App that the ``durq serve`` smoke test serves (``--app tests.api.serve_app:app``)."""

from __future__ import annotations

import durq

app = durq.App()  # DURQ_DATABASE_URL from the environment


@app.task
def add(x: int, y: int) -> int:
    return x + y
