-- Read-only statistics (SQLite).

-- name: pickup_latencies
-- For each job's latest attempt: seconds from when it was due to when a worker took it.
SELECT a.attempt, a.started_at - j.run_at AS pickup_s
FROM durq_attempts a JOIN durq_jobs j ON j.id = a.job_id AND j.claim_version = a.claim_version

-- name: attempt_counts
SELECT sum(attempt > 1) AS retries, count(*) AS attempts FROM durq_attempts
