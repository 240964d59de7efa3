"""An App module whose own import fails (the CLI must say so, not blame PYTHONPATH)."""

import durq

app = durq.App()
raise RuntimeError("the settings module this app needs is misconfigured")
