-- Read-only statistics (PostgreSQL).

-- name: pickup_latencies
-- For each job's latest attempt: seconds from when it was due to when a worker took it.
SELECT a.attempt, EXTRACT(EPOCH FROM a.started_at - j.run_at) AS pickup_s
FROM durq_attempts a JOIN durq_jobs j ON j.id = a.job_id AND j.claim_version = a.claim_version

-- name: attempt_counts
SELECT count(*) FILTER (WHERE attempt > 1) AS retries, count(*) AS attempts FROM durq_attempts

-- ---- the dashboard's history (rolled up by maintenance) ----

-- name: stats_attempts_since
-- Attempts finished at or after :since (epoch seconds): their queue, minute and outcome (a
-- failed attempt that left its job dead-lettered counts as dead_letter), and the pickup
-- latency where it is still known (the job's latest attempt, not rescheduled since).
SELECT j.queue,
       CAST(floor(EXTRACT(EPOCH FROM a.finished_at) / 60) * 60 AS bigint) AS minute,
       CASE WHEN a.outcome = 'failed' AND a.claim_version = j.claim_version
                 AND j.state = 'dead_letter' THEN 'dead_letter' ELSE a.outcome END AS outcome,
       CASE WHEN a.claim_version = j.claim_version AND a.started_at IS NOT NULL
                 AND j.state IN ('succeeded', 'dead_letter', 'cancelled')
            THEN EXTRACT(EPOCH FROM a.started_at - j.run_at) END AS pickup_s
FROM durq_attempts a JOIN durq_jobs j ON j.id = a.job_id
WHERE a.finished_at >= to_timestamp(CAST(:since AS float8))

-- name: dead_letter_groups
-- Dead-lettered jobs by task and error code, the largest groups first.
SELECT task, last_error_code AS error_code, count(*) AS n, max(id) AS latest_id,
       max(finished_at) AS latest_at
FROM durq_jobs
WHERE state = 'dead_letter'
  AND (CAST(:created_by AS text) IS NULL OR created_by = CAST(:created_by AS text))
GROUP BY task, last_error_code
ORDER BY n DESC, task, error_code
LIMIT :limit

-- name: dead_letter_ids
-- The ids of one group's dead-lettered jobs, newest first.
SELECT id FROM durq_jobs
WHERE state = 'dead_letter' AND task = :task
  AND last_error_code IS NOT DISTINCT FROM CAST(:error_code AS text)
  AND (CAST(:created_by AS text) IS NULL OR created_by = CAST(:created_by AS text))
ORDER BY id DESC
LIMIT :limit
