-- The HTTP service's statements (PostgreSQL): API keys, readiness, scrape-time metrics.

-- name: api_key_insert
INSERT INTO durq_api_keys (id, owner, role, key_hash, created_at)
VALUES (:id, :owner, :role, :key_hash, now())
RETURNING id, owner, role, created_at, last_used_at, disabled_at

-- name: api_key_bootstrap
-- Development keys: create, or re-enable and re-role the key with this hash; never duplicate.
INSERT INTO durq_api_keys (id, owner, role, key_hash, created_at)
VALUES (:id, :owner, :role, :key_hash, now())
ON CONFLICT (key_hash) DO UPDATE
SET owner = EXCLUDED.owner, role = EXCLUDED.role, disabled_at = NULL
RETURNING id, owner, role, created_at, last_used_at, disabled_at

-- name: api_key_touch
UPDATE durq_api_keys SET last_used_at = now() WHERE id = :id

-- name: api_key_list
SELECT id, owner, role, created_at, last_used_at, disabled_at FROM durq_api_keys
WHERE (CAST(:after_id AS text) IS NULL OR id > CAST(:after_id AS text))
ORDER BY id
LIMIT :limit

-- name: api_key_disable
UPDATE durq_api_keys SET disabled_at = COALESCE(disabled_at, now()) WHERE id = :id
RETURNING id, owner, role, created_at, last_used_at, disabled_at

-- name: api_notify_queue
-- Wake idle workers listening on the queue's channel (delivered at commit).
SELECT pg_notify('durq_jobs', :queue) AS notified

-- name: metrics_job_args
-- One task's stored jobs by state and the value of one argument (an application's own
-- metric labels; '' for none), with the attempts after the first.
SELECT state, CASE WHEN :arg = '' THEN NULL ELSE args ->> CAST(:arg AS TEXT) END AS label,
       count(*) AS n,
       coalesce(sum(GREATEST(attempt - 1, 0)), 0) AS retries
FROM durq_jobs WHERE task = :task GROUP BY state, label
