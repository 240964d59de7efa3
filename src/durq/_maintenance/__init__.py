"""Housekeeping that keeps a durq database healthy, safe with any number of workers.

* :mod:`.reclaim` — expired leases back to ``retry_wait`` or ``dead_letter`` (every worker
  runs it; claims on rows are exclusive, so two reclaimers never take the same job);
* :mod:`.prune` — finished jobs past their retention deleted, their ids kept as tombstones
  so a lookup answers "gone" (leader only);
* :mod:`.periodic` — ``@app.periodic(cron=...)`` tasks enqueued once per tick (leader only,
  and an idempotency key per tick makes even two leaders enqueue a tick once);
* :mod:`.guardrails` — queues whose backlog stays over a guardrail raise an alert that
  resolves itself when it clears (leader only);
* :mod:`.leader` — the lease row in ``durq_leaders`` that elects the leader.

Each module has a ``run_once()`` that does one round; :class:`.loop.Maintenance` runs them
inside every worker. Due scheduled jobs need no promotion: a claim takes any ready job whose
``run_at`` has passed.
"""
