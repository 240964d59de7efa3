"""The rules durq applies over its drivers: idempotent enqueue, the execution pipeline,
the lease protocol and its failure policy, operator actions. No I/O of its own beyond the
driver's named operations; the worker, the API and ``App`` all come through here."""
