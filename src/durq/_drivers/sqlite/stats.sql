-- Read-only statistics (SQLite).

-- name: pickup_latencies
-- For each job's latest attempt: seconds from when it was due to when a worker took it
-- (a success stored on its job row included).
SELECT a.attempt, a.started_at - j.run_at AS pickup_s
FROM durq_attempts a JOIN durq_jobs j ON j.id = a.job_id AND j.claim_version = a.claim_version
UNION ALL
SELECT j.attempt, j.attempted_at - j.run_at FROM durq_jobs j WHERE {success_on_row}

-- name: attempt_counts
SELECT sum(attempt > 1) AS retries, count(*) AS attempts
FROM (SELECT attempt FROM durq_attempts
      UNION ALL
      SELECT j.attempt FROM durq_jobs j WHERE {success_on_row})

-- ---- the dashboard's history (rolled up by maintenance) ----

-- name: queue_live_counts
-- Jobs waiting or running, by queue and state, each part read through an index the worker
-- keeps anyway (ready, limited, lease), never touching finished jobs however many are
-- retained. (An index of its own on (queue, state) halved the drain rate: every claim and
-- enqueue wrote a duplicate key into it.)
SELECT queue, state, sum(n) AS n FROM (
    SELECT queue, state, count(*) AS n FROM durq_jobs
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NULL
    GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) AS n FROM durq_jobs
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL
    GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) AS n FROM durq_jobs
    WHERE state = 'running'
    GROUP BY queue, state
) live
GROUP BY queue, state

-- name: stats_rollup
-- Attempts finished at or after :since (epoch seconds), counted per queue and minute in the
-- database (a round reads a few rows, however many jobs ran): succeeded, failed (any other
-- outcome; a failed attempt that left its job dead-lettered counts as dead_letter), and the
-- nearest-rank p50/p95 pickup latency (due time to claim) of the attempts whose pickup is
-- still known (the job's latest attempt, not rescheduled since). Ranks: ceil(q * n).
-- Successes stored on their job row are found through durq_jobs_finished_idx. CROSS JOIN
-- keeps the attempts the outer loop: with statistics of an empty durq_attempts (every job
-- succeeded) the planner would scan every job and probe for its attempts instead.
WITH s AS (
    SELECT j.queue,
           CAST(a.finished_at / 60 AS INTEGER) * 60 AS minute,
           CASE WHEN a.outcome = 'failed' AND a.claim_version = j.claim_version
                     AND j.state = 'dead_letter' THEN 'dead_letter' ELSE a.outcome END AS outcome,
           CASE WHEN a.claim_version = j.claim_version AND a.started_at IS NOT NULL
                     AND j.state IN ('succeeded', 'dead_letter', 'cancelled')
                THEN CAST(round(1000 * max(a.started_at - j.run_at, 0)) AS INTEGER)
           END AS pickup_ms
    FROM durq_attempts a CROSS JOIN durq_jobs j ON j.id = a.job_id
    WHERE a.finished_at >= :since
    UNION ALL
    SELECT j.queue, CAST(j.finished_at / 60 AS INTEGER) * 60, 'succeeded',
           CAST(round(1000 * max(j.attempted_at - j.run_at, 0)) AS INTEGER)
    FROM durq_jobs j
    WHERE j.finished_at >= :since AND {success_on_row}
), {stats_rollup_ranked}

-- name: dead_letter_groups
-- Dead-lettered jobs by task and error code, the largest groups first.
SELECT task, last_error_code AS error_code, count(*) AS n, max(id) AS latest_id,
       max(finished_at) AS latest_at
FROM durq_jobs
WHERE state = 'dead_letter' AND (:created_by IS NULL OR created_by = :created_by)
GROUP BY task, last_error_code
ORDER BY n DESC, task, error_code
LIMIT :limit

-- name: dead_letter_ids
-- The ids of one group's dead-lettered jobs, newest first.
SELECT id FROM durq_jobs
WHERE state = 'dead_letter' AND task = :task AND last_error_code IS :error_code
  AND (:created_by IS NULL OR created_by = :created_by)
ORDER BY id DESC
LIMIT :limit
