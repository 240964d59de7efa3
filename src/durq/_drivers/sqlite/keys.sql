-- Circuit breakers, per-key limits, alerts, run logs, guardrail windows (SQLite).
-- Writes run in BEGIN IMMEDIATE transactions: one writer at a time, no row locks needed.

-- name: breaker_columns
key, consecutive_failures, last_failure_at, paused_until, held_until, opened_count,
threshold, pause_seconds, updated_at

-- name: breaker_enter
INSERT INTO durq_breakers (key, threshold, pause_seconds, updated_at)
VALUES (:key, :threshold, :pause_seconds, :now)
ON CONFLICT (key) DO UPDATE
SET threshold = excluded.threshold, pause_seconds = excluded.pause_seconds
RETURNING {breaker_columns}, :now AS now

-- name: breaker_lock
SELECT {breaker_columns}, :now AS now FROM durq_breakers WHERE key = :key

-- name: breaker_lock_many
-- The write transaction already holds the database's one write lock.
SELECT {breaker_columns}, :now AS now FROM durq_breakers
WHERE key IN (SELECT value FROM json_each(:keys)) ORDER BY key

-- name: breaker_read_many
SELECT {breaker_columns}, :now AS now FROM durq_breakers
WHERE key IN (SELECT value FROM json_each(:keys))

-- name: breaker_set
UPDATE durq_breakers
SET consecutive_failures = :failures,
    last_failure_at = CASE WHEN :failed THEN :now ELSE last_failure_at END,
    paused_until = :paused_until,
    held_until = :held_until,
    opened_count = opened_count + :opened,
    updated_at = :now
WHERE key = :key
RETURNING {breaker_columns}, :now AS now

-- name: breaker_list
SELECT {breaker_columns}, :now AS now FROM durq_breakers
WHERE NOT :failing_only OR consecutive_failures > 0 OR paused_until IS NOT NULL
ORDER BY paused_until IS NULL, paused_until DESC, key
LIMIT :limit

-- name: breaker_totals
SELECT count(paused_until) AS open, COALESCE(sum(opened_count), 0) AS opened
FROM durq_breakers

-- name: job_park
UPDATE durq_jobs
SET run_at = max(run_at, CASE WHEN id = (SELECT id FROM durq_jobs
                                         WHERE breaker_key = :key
                                           AND state IN ('queued', 'retry_wait')
                                         ORDER BY priority, run_at, id LIMIT 1)
                              THEN :probe_at ELSE :held_until END),
    updated_at = :now
WHERE breaker_key = :key AND state IN ('queued', 'retry_wait')
RETURNING id

-- name: job_release
UPDATE durq_jobs SET run_at = :now, updated_at = :now
WHERE breaker_key = :key AND state IN ('queued', 'retry_wait')
  AND run_at > :now AND run_at <= :held_until
RETURNING id

-- name: limit_define
INSERT INTO durq_limits (key, concurrency, rate, rate_window)
VALUES (:key, :concurrency, :rate, :rate_window)
ON CONFLICT (key) DO UPDATE
SET concurrency = excluded.concurrency, rate = excluded.rate, rate_window = excluded.rate_window
WHERE durq_limits.concurrency IS NOT excluded.concurrency
   OR durq_limits.rate IS NOT excluded.rate
   OR durq_limits.rate_window IS NOT excluded.rate_window

-- name: limit_release
UPDATE durq_limits SET running = max(running - :n, 0) WHERE key = :key

-- name: limit_take
UPDATE durq_limits SET running = running + 1 WHERE key = :key

-- name: limit_list
SELECT key, concurrency, rate, rate_window, running, window_start, window_count, claimed_at
FROM durq_limits ORDER BY key LIMIT :limit

-- name: alert_columns
id, category, severity, key, context, first_seen, last_seen, count, resolved_at, acked_at

-- name: alert_raise
INSERT INTO durq_alerts (category, severity, key, context, first_seen, last_seen)
VALUES (:category, :severity, :key, :context, :now, :now)
ON CONFLICT (category, key) WHERE resolved_at IS NULL DO UPDATE
SET last_seen = excluded.last_seen, count = durq_alerts.count + 1,
    context = excluded.context, severity = excluded.severity
RETURNING {alert_columns}

-- name: alert_resolve
UPDATE durq_alerts SET resolved_at = :now
WHERE category = :category AND key = :key AND resolved_at IS NULL
RETURNING {alert_columns}

-- name: alert_open
SELECT {alert_columns} FROM durq_alerts
WHERE category = :category AND key = :key AND resolved_at IS NULL

-- name: alert_list
SELECT {alert_columns} FROM durq_alerts
WHERE :state = 'all'
   OR (:state = 'open' AND resolved_at IS NULL)
   OR (:state = 'resolved' AND resolved_at IS NOT NULL)
ORDER BY id DESC
LIMIT :limit

-- name: alert_ack
UPDATE durq_alerts SET acked_at = COALESCE(acked_at, :now) WHERE id = :id
RETURNING {alert_columns}

-- name: attempt_report_success
-- The run log of a succeeded attempt, whose facts are on the job row: its record is stored
-- here, with the log (a stored record wins over the job row's in every read). Nothing
-- back: the claim did not succeed, and attempt_report updates its stored record.
INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                           finished_at, runtime_ms, outcome, processed, failed, summary)
SELECT id, attempt, claim_version, worker_id, attempted_at, finished_at, runtime_ms,
       'succeeded', :processed, :failed, :summary
FROM durq_jobs
WHERE id = :job_id AND claim_version = :claim_version AND state = 'succeeded'
ON CONFLICT (job_id, claim_version) DO UPDATE
SET processed = excluded.processed, failed = excluded.failed, summary = excluded.summary
RETURNING job_id

-- name: attempt_report
UPDATE durq_attempts SET processed = :processed, failed = :failed, summary = :summary
WHERE job_id = :job_id AND claim_version = :claim_version

-- name: queue_mark_degraded
INSERT INTO durq_queues (name, paused, updated_at, degraded_since) VALUES (:name, 0, :now, :now)
ON CONFLICT (name) DO UPDATE SET degraded_since = COALESCE(durq_queues.degraded_since, :now)
RETURNING :now - degraded_since AS degraded_for

-- name: queue_clear_degraded
UPDATE durq_queues SET degraded_since = NULL
WHERE name = :name AND degraded_since IS NOT NULL
RETURNING name
