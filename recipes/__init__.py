"""Each seed's own job system rebuilt on durq's public API (see each recipe's README)."""
