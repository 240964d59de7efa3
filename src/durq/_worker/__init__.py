"""The worker runtime: producer (claims), executor (runs), completer (writes)."""
