-- The HTTP service's statements (SQLite): API keys, readiness, scrape-time metrics.

-- name: api_key_insert
INSERT INTO durq_api_keys (id, owner, role, key_hash, created_at)
VALUES (:id, :owner, :role, :key_hash, :now)
RETURNING id, owner, role, created_at, last_used_at, disabled_at

-- name: api_key_bootstrap
-- Development keys: create, or re-enable and re-role the key with this hash; never duplicate.
INSERT INTO durq_api_keys (id, owner, role, key_hash, created_at)
VALUES (:id, :owner, :role, :key_hash, :now)
ON CONFLICT (key_hash) DO UPDATE
SET owner = excluded.owner, role = excluded.role, disabled_at = NULL
RETURNING id, owner, role, created_at, last_used_at, disabled_at

-- name: api_key_touch
UPDATE durq_api_keys SET last_used_at = :now WHERE id = :id

-- name: api_key_list
SELECT id, owner, role, created_at, last_used_at, disabled_at FROM durq_api_keys
WHERE (:after_id IS NULL OR id > :after_id)
ORDER BY id
LIMIT :limit

-- name: api_key_disable
UPDATE durq_api_keys SET disabled_at = COALESCE(disabled_at, :now) WHERE id = :id
RETURNING id, owner, role, created_at, last_used_at, disabled_at

-- name: api_notify_queue
-- SQLite workers poll; nothing to wake.
SELECT 1 AS ok

-- name: metrics_job_args
-- One task's stored jobs by state and the value of one argument (an application's own
-- metric labels; '' for none), with the attempts after the first.
SELECT state,
       CASE WHEN :arg = '' THEN NULL ELSE CAST(json_extract(args, '$.' || :arg) AS TEXT) END
           AS label, count(*) AS n,
       coalesce(sum(max(attempt - 1, 0)), 0) AS retries
FROM durq_jobs WHERE task = :task GROUP BY state, label
