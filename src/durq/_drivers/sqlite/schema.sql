-- Schema bookkeeping (SQLite).

-- name: migrations_table
CREATE TABLE IF NOT EXISTS durq_migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  REAL NOT NULL
)

-- name: migrations_lock
SELECT 1

-- name: migration_record
INSERT INTO durq_migrations (version, name, applied_at) VALUES (:version, :name, :now)

-- name: migrations_exists
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'durq_migrations'
