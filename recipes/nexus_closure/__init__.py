"""Nexus default-library closure (seeds 000 + 001) rebuilt on durq: closure and intrinsic
provenance across every writer path, the durable backfill job on queue ``ingest``, and the
internal requeue route. See README.md."""
