-- Schema bookkeeping (PostgreSQL).

-- name: migrations_table
CREATE TABLE IF NOT EXISTS durq_migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
)

-- name: migrations_lock
SELECT pg_advisory_xact_lock(4242424242)

-- name: migration_record
INSERT INTO durq_migrations (version, name) VALUES (:version, :name)

-- name: migrations_exists
SELECT 1 FROM pg_tables WHERE tablename = 'durq_migrations' AND schemaname = current_schema()
