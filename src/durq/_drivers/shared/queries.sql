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

-- name: tombstone_owner
SELECT created_by FROM durq_tombstones WHERE job_id = :id

-- name: success_on_row
-- A job ``j`` whose succeeded attempt is stored on its row only: the finish writes no
-- durq_attempts row for a success. A row stored for that claim (with a run report, before
-- a requeue, or before schema 0012) wins, so every read counts an attempt once.
j.state = 'succeeded'
AND NOT EXISTS (SELECT 1 FROM durq_attempts s
                WHERE s.job_id = j.id AND s.claim_version = j.claim_version)

-- name: attempt_list
-- The stored records, and a succeeded attempt read from the job row as the record it holds.
SELECT job_id, attempt, claim_version, worker_id, started_at, finished_at, runtime_ms,
       outcome, error_code, error_message, processed, failed, summary, traceback
FROM durq_attempts WHERE job_id = :job_id
UNION ALL
SELECT j.id, j.attempt, j.claim_version, j.worker_id, j.attempted_at, j.finished_at,
       j.runtime_ms, 'succeeded', NULL, NULL, NULL, NULL, NULL, NULL
FROM durq_jobs j WHERE j.id = :job_id AND {success_on_row}
ORDER BY claim_version

-- name: attempt_outcome
-- What the attempt record of one claim says (none: nothing finished that claim yet); a
-- success is on the job row, which still holds that claim (a success never bumps it).
SELECT outcome FROM durq_attempts WHERE job_id = :job_id AND claim_version = :claim_version
UNION ALL
SELECT 'succeeded' FROM durq_jobs j
WHERE j.id = :job_id AND j.claim_version = :claim_version AND {success_on_row}

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

-- ---- from api ----

-- name: metrics_attempts
-- Attempts still stored (successes on their job row included), by job queue/task and
-- outcome, with the runtime bucketed (upper bounds in milliseconds, matching
-- durq.api.metrics.DURATION_BUCKETS).
SELECT a.queue, a.task, a.outcome,
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
FROM (
    SELECT j.queue, j.task, r.outcome, r.runtime_ms, r.attempt
    FROM durq_attempts r JOIN durq_jobs j ON j.id = r.job_id
    UNION ALL
    SELECT j.queue, j.task, 'succeeded', j.runtime_ms, j.attempt
    FROM durq_jobs j WHERE {success_on_row}
) a
GROUP BY a.queue, a.task, a.outcome, bucket

-- ---- the dashboard ----

-- name: stats_minute_upsert
INSERT INTO durq_stats_minutes
    (minute, queue, succeeded, failed, dead_letter, pickup_p50_ms, pickup_p95_ms)
VALUES (:minute, :queue, :succeeded, :failed, :dead_letter, :pickup_p50_ms, :pickup_p95_ms)
ON CONFLICT (minute, queue) DO UPDATE SET
    succeeded = excluded.succeeded, failed = excluded.failed,
    dead_letter = excluded.dead_letter, pickup_p50_ms = excluded.pickup_p50_ms,
    pickup_p95_ms = excluded.pickup_p95_ms

-- name: stats_minutes_since
SELECT minute, queue, succeeded, failed, dead_letter, pickup_p50_ms, pickup_p95_ms
FROM durq_stats_minutes
WHERE minute >= :since
ORDER BY minute, queue

-- name: stats_minutes_prune
DELETE FROM durq_stats_minutes WHERE minute < :before

-- name: stats_rollup_ranked
-- The end of both dialects' stats_rollup, after their CTE ``s`` (queue, minute, outcome,
-- pickup_ms per attempt): counts per queue and minute, and nearest-rank p50/p95 pickups.
ranked AS (
    SELECT s.*,
           row_number() OVER (PARTITION BY queue, minute
                              ORDER BY pickup_ms IS NULL, pickup_ms) AS rn,
           count(pickup_ms) OVER (PARTITION BY queue, minute) AS np
    FROM s
)
SELECT queue, minute,
       count(CASE WHEN outcome = 'succeeded' THEN 1 END) AS succeeded,
       count(CASE WHEN outcome NOT IN ('succeeded', 'dead_letter') THEN 1 END) AS failed,
       count(CASE WHEN outcome = 'dead_letter' THEN 1 END) AS dead_letter,
       max(CASE WHEN rn = (np + 1) / 2 THEN pickup_ms END) AS pickup_p50_ms,
       max(CASE WHEN rn = (95 * np + 99) / 100 THEN pickup_ms END) AS pickup_p95_ms
FROM ranked
GROUP BY queue, minute
ORDER BY minute, queue
