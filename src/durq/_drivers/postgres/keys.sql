-- Circuit breakers, per-key limits, alerts, run logs, guardrail windows (PostgreSQL).

-- name: breaker_columns
key, consecutive_failures, last_failure_at, paused_until, held_until, opened_count,
threshold, pause_seconds, updated_at

-- name: breaker_enter
-- An enqueue names the key: record the rule in force and lock the row, so a breaker that
-- opens meanwhile waits for this job to commit and then parks it with the others.
INSERT INTO durq_breakers (key, threshold, pause_seconds)
VALUES (:key, :threshold, :pause_seconds)
ON CONFLICT (key) DO UPDATE
SET threshold = EXCLUDED.threshold, pause_seconds = EXCLUDED.pause_seconds
RETURNING {breaker_columns}, now() AS now

-- name: breaker_lock
SELECT {breaker_columns}, now() AS now FROM durq_breakers WHERE key = :key FOR UPDATE

-- name: breaker_lock_many
-- In key order, so two finishers locking overlapping keys never deadlock.
SELECT {breaker_columns}, now() AS now FROM durq_breakers
WHERE key = ANY(CAST(:keys AS text[])) ORDER BY key FOR UPDATE

-- name: breaker_read_many
SELECT {breaker_columns}, now() AS now FROM durq_breakers WHERE key = ANY(CAST(:keys AS text[]))

-- name: breaker_set
UPDATE durq_breakers
SET consecutive_failures = :failures,
    last_failure_at = CASE WHEN CAST(:failed AS boolean) THEN now() ELSE last_failure_at END,
    paused_until = CAST(:paused_until AS timestamptz),
    held_until = CAST(:held_until AS timestamptz),
    opened_count = opened_count + CAST(:opened AS int),
    updated_at = now()
WHERE key = :key
RETURNING {breaker_columns}, now() AS now

-- name: breaker_list
SELECT {breaker_columns}, now() AS now FROM durq_breakers
WHERE NOT CAST(:failing_only AS boolean) OR consecutive_failures > 0 OR paused_until IS NOT NULL
ORDER BY paused_until IS NULL, paused_until DESC, key
LIMIT :limit

-- name: breaker_totals
SELECT count(*) FILTER (WHERE paused_until IS NOT NULL) AS open,
       COALESCE(sum(opened_count), 0) AS opened
FROM durq_breakers

-- name: job_park
-- Hold a breaker key's waiting jobs: the first in claim order until :probe_at (the
-- half-open probe), the others until :held_until. Jobs due later keep their run_at.
WITH probe AS (
    SELECT id FROM durq_jobs
    WHERE breaker_key = :key AND state IN ('queued', 'retry_wait')
    ORDER BY priority, run_at, id
    LIMIT 1
)
UPDATE durq_jobs
SET run_at = GREATEST(run_at, CASE WHEN id IN (SELECT id FROM probe)
                                   THEN CAST(:probe_at AS timestamptz)
                                   ELSE CAST(:held_until AS timestamptz) END),
    updated_at = now()
WHERE breaker_key = :key AND state IN ('queued', 'retry_wait')
RETURNING id

-- name: job_release
-- The breaker closed: its parked jobs are due now.
UPDATE durq_jobs SET run_at = now(), updated_at = now()
WHERE breaker_key = :key AND state IN ('queued', 'retry_wait')
  AND run_at > now() AND run_at <= CAST(:held_until AS timestamptz)
RETURNING id

-- name: limit_define
-- The limits in force for a key (the latest enqueue's); written only when they change.
INSERT INTO durq_limits (key, concurrency, rate, rate_window)
VALUES (:key, CAST(:concurrency AS int), CAST(:rate AS int), :rate_window)
ON CONFLICT (key) DO UPDATE
SET concurrency = EXCLUDED.concurrency, rate = EXCLUDED.rate, rate_window = EXCLUDED.rate_window
WHERE (durq_limits.concurrency, durq_limits.rate, durq_limits.rate_window)
      IS DISTINCT FROM (EXCLUDED.concurrency, EXCLUDED.rate, EXCLUDED.rate_window)

-- name: limit_release
-- Jobs of the key left `running` (finished, retried, reclaimed): their slots are free.
UPDATE durq_limits SET running = GREATEST(running - :n, 0) WHERE key = :key

-- name: limit_take
-- A job claimed by id outside the keyed claim (App.run_job) still holds a slot.
UPDATE durq_limits SET running = running + 1 WHERE key = :key

-- name: limit_list
SELECT key, concurrency, rate, rate_window, running, window_start, window_count, claimed_at
FROM durq_limits ORDER BY key LIMIT :limit

-- name: alert_columns
id, category, severity, key, CAST(context AS text) AS context, first_seen, last_seen, count,
resolved_at, acked_at

-- name: alert_raise
-- One open alert per (category, key): raising it again counts it and refreshes it.
INSERT INTO durq_alerts (category, severity, key, context)
VALUES (:category, :severity, :key, CAST(:context AS jsonb))
ON CONFLICT (category, key) WHERE resolved_at IS NULL DO UPDATE
SET last_seen = now(), count = durq_alerts.count + 1, context = EXCLUDED.context,
    severity = EXCLUDED.severity
RETURNING {alert_columns}

-- name: alert_resolve
UPDATE durq_alerts SET resolved_at = now()
WHERE category = :category AND key = :key AND resolved_at IS NULL
RETURNING {alert_columns}

-- name: alert_open
SELECT {alert_columns} FROM durq_alerts
WHERE category = :category AND key = :key AND resolved_at IS NULL

-- name: alert_list
SELECT {alert_columns} FROM durq_alerts
WHERE CAST(:state AS text) = 'all'
   OR (CAST(:state AS text) = 'open' AND resolved_at IS NULL)
   OR (CAST(:state AS text) = 'resolved' AND resolved_at IS NOT NULL)
ORDER BY id DESC
LIMIT :limit

-- name: alert_ack
UPDATE durq_alerts SET acked_at = COALESCE(acked_at, now()) WHERE id = :id
RETURNING {alert_columns}

-- name: attempt_report_success
-- The run log of a succeeded attempt, whose facts are on the job row: its record is stored
-- here, with the log (a stored record wins over the job row's in every read). Nothing
-- back: the claim did not succeed, and attempt_report updates its stored record.
INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                           finished_at, runtime_ms, outcome, processed, failed, summary)
SELECT id, attempt, claim_version, worker_id, attempted_at, finished_at, runtime_ms,
       'succeeded', CAST(:processed AS int), CAST(:failed AS int), CAST(:summary AS text)
FROM durq_jobs
WHERE id = :job_id AND claim_version = :claim_version AND state = 'succeeded'
ON CONFLICT (job_id, claim_version) DO UPDATE
SET processed = EXCLUDED.processed, failed = EXCLUDED.failed, summary = EXCLUDED.summary
RETURNING job_id

-- name: attempt_report
UPDATE durq_attempts SET processed = :processed, failed = :failed, summary = :summary
WHERE job_id = :job_id AND claim_version = :claim_version

-- name: queue_mark_degraded
-- Seconds the queue has been over a guardrail, counting from its first degraded check.
INSERT INTO durq_queues (name, paused, degraded_since) VALUES (:name, false, now())
ON CONFLICT (name) DO UPDATE SET degraded_since = COALESCE(durq_queues.degraded_since, now())
RETURNING EXTRACT(EPOCH FROM now() - degraded_since) AS degraded_for

-- name: queue_clear_degraded
UPDATE durq_queues SET degraded_since = NULL
WHERE name = :name AND degraded_since IS NOT NULL
RETURNING name
