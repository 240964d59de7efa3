-- Blocks whose SQL is the same in every dialect, loaded beside each dialect's own.

-- ---- from api ----

-- name: api_key_by_hash
SELECT id, owner, role, key_hash, created_at, last_used_at, disabled_at
FROM durq_api_keys WHERE key_hash = :key_hash

-- name: api_key_get
SELECT id, owner, role, created_at, last_used_at, disabled_at FROM durq_api_keys WHERE id = :id

-- name: api_ping
SELECT 1 AS ok

-- name: metrics_job_counts
SELECT queue, task, state, count(*) AS n FROM durq_jobs GROUP BY queue, task, state

-- ---- from queries ----

-- name: idem_delete
DELETE FROM durq_idempotency WHERE scope = :scope AND key = :key

-- name: job_get
SELECT {job_columns} FROM durq_jobs WHERE id = :id

-- name: tombstone_get
SELECT job_id FROM durq_tombstones WHERE job_id = :id

-- name: attempt_list
SELECT job_id, attempt, claim_version, worker_id, started_at, finished_at, runtime_ms,
       outcome, error_code, error_message, processed, failed, summary, traceback
FROM durq_attempts WHERE job_id = :job_id ORDER BY claim_version

-- name: queue_counts
SELECT queue, state, count(*) AS n FROM durq_jobs GROUP BY queue, state

-- name: queue_list
SELECT name, paused, updated_at FROM durq_queues ORDER BY name

-- ---- from schema ----

-- name: migrations_applied
SELECT version FROM durq_migrations ORDER BY version

-- ---- from worker ----

-- name: leader_release
DELETE FROM durq_leaders WHERE name = :name AND holder = :holder
