"""The App the dashboard's browser tests serve and work (``tests.dashboard.tasks_app:app``)."""

from __future__ import annotations

from pathlib import Path

import durq

app = durq.App()  # DURQ_DATABASE_URL from the environment


@app.task(max_attempts=1)
def needs_file(path: str) -> dict[str, str]:
    """Dead-letters until ``path`` exists: a failure an operator can fix, then requeue."""
    if not Path(path).exists():
        raise durq.Fail("E_MISSING_FILE", f"{path} does not exist yet")
    return {"found": path}


@app.task
def noop(n: int) -> int:
    return n
