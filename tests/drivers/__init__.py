"""Driver conformance: every public operation of ``durq._drivers.Driver``, run the same
way over SQLite and PostgreSQL (River's ``riverdrivertest`` is the model)."""
