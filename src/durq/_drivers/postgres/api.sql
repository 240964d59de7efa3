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

-- name: metrics_attempts
-- Attempts still stored, by job queue/task and outcome, with the runtime bucketed
-- (upper bounds in milliseconds, matching durq.api.metrics.DURATION_BUCKETS).
SELECT j.queue, j.task, a.outcome,
       CASE
           WHEN a.runtime_ms IS NULL THEN NULL
           WHEN a.runtime_ms <= 5 THEN 0
           WHEN a.runtime_ms <= 10 THEN 1
           WHEN a.runtime_ms <= 25 THEN 2
           WHEN a.runtime_ms <= 50 THEN 3
           WHEN a.runtime_ms <= 100 THEN 4
           WHEN a.runtime_ms <= 250 THEN 5
           WHEN a.runtime_ms <= 500 THEN 6
           WHEN a.runtime_ms <= 1000 THEN 7
           WHEN a.runtime_ms <= 2500 THEN 8
           WHEN a.runtime_ms <= 5000 THEN 9
           WHEN a.runtime_ms <= 10000 THEN 10
           WHEN a.runtime_ms <= 30000 THEN 11
           WHEN a.runtime_ms <= 60000 THEN 12
           WHEN a.runtime_ms <= 300000 THEN 13
           WHEN a.runtime_ms <= 900000 THEN 14
           WHEN a.runtime_ms <= 3600000 THEN 15
           ELSE 16
       END AS bucket,
       count(*) AS n,
       coalesce(sum(a.runtime_ms), 0) AS runtime_ms,
       count(*) FILTER (WHERE a.attempt > 1) AS retries
FROM durq_attempts a JOIN durq_jobs j ON j.id = a.job_id
GROUP BY j.queue, j.task, a.outcome, bucket
