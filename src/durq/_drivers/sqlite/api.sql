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
       sum(CASE WHEN a.attempt > 1 THEN 1 ELSE 0 END) AS retries
FROM durq_attempts a JOIN durq_jobs j ON j.id = a.job_id
GROUP BY j.queue, j.task, a.outcome, bucket
