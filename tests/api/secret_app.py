"""The App the no-secrets-in-output test runs its worker with (settings from the environment)."""

from __future__ import annotations

import durq

app = durq.App()


@app.task(name="use_secret", pass_context=True, max_attempts=1)
def use_secret(ctx: durq.JobContext) -> dict[str, int]:
    return {"token_length": len(ctx.secrets["token"])}
