"""An App with a periodic task that ticks every second (``tests.worker.periodic_app:app``)."""

from __future__ import annotations

import durq

app = durq.App()


@app.periodic(cron="* * * * * *", queue="ticks")
def heartbeat_report() -> dict[str, str]:
    return {"status": "ok"}
