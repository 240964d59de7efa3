-- Core job operations (SQLite). Time is :now, seconds since the epoch, bound by the backend.
-- Lists arrive as JSON text and are read with json_each().

-- name: job_columns
id, queue, task, args, state, stage, priority, attempt, max_attempts,
claim_version, worker_id, run_at, created_at, updated_at, attempted_at, finished_at,
lease_expires_at, heartbeat_at, last_error_code, last_error, result,
retry_policy, cancel_requested, created_by, idempotency_key,
breaker_key, concurrency_key

-- name: job_insert
-- Only the id and the clock come back: the rest of the Job is what was sent.
INSERT INTO durq_jobs (queue, task, args, priority, run_at, max_attempts, retry_policy,
                       created_by, idempotency_key, breaker_key, concurrency_key,
                       trace_context, created_at, updated_at, webhook_url)
VALUES (:queue, :task, :args, :priority, COALESCE(:run_at, :now + :delay), :max_attempts,
        :retry_policy, :created_by, :idempotency_key, :breaker_key, :concurrency_key,
        :trace_context, :now, :now, :webhook_url)
RETURNING id, run_at, created_at

-- name: job_insert_quiet
-- SQLite has no NOTIFY to leave out (its workers are woken after the commit): the same insert.
{job_insert}

-- name: job_trace_context
SELECT id, trace_context FROM durq_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND trace_context IS NOT NULL

-- name: job_delete
-- Attempts and artifacts go with the job (ON DELETE CASCADE).
DELETE FROM durq_jobs WHERE id = :id

-- name: idem_get
SELECT job_id, args_hash, expires_at <= :now AS expired
FROM durq_idempotency WHERE scope = :scope AND key = :key

-- name: idem_insert
INSERT INTO durq_idempotency (scope, key, args_hash, job_id, created_at, expires_at)
VALUES (:scope, :key, :args_hash, :job_id, :now, :now + :ttl)
ON CONFLICT (scope, key) DO NOTHING
RETURNING job_id

-- name: job_filter
-- The listing filters, each ignored when its parameter is NULL.
WHERE (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:created_by IS NULL OR created_by = :created_by)
  AND (:created_after IS NULL OR created_at >= :created_after)
  AND (:created_before IS NULL OR created_at < :created_before)
  AND (:before_id IS NULL OR id < :before_id)

-- name: job_list
SELECT {job_columns} FROM durq_jobs
{job_filter}
ORDER BY id DESC
LIMIT :limit

-- name: job_count
SELECT count(*) AS n FROM durq_jobs
{job_filter}

-- name: claim_set
-- What every claim writes: running under a fresh lease, a new claim_version, one more attempt.
SET state = 'running', stage = NULL, worker_id = :worker_id,
    attempt = attempt + 1, claim_version = claim_version + 1,
    attempted_at = :now, heartbeat_at = :now, updated_at = :now,
    lease_expires_at = :now + :lease_seconds, cancel_requested = 0

-- name: job_claim
-- One write transaction (BEGIN IMMEDIATE): pick ready rows of one queue by priority and age.
-- INDEXED BY: the ready index hands rows over in claim order and stops at LIMIT. Left to
-- itself, the planner may take durq_jobs_waiting_idx (queue, run_at) and sort every ready
-- row of the queue on each claim (6.6 ms instead of well under 1 ms with 30,000 waiting).
UPDATE durq_jobs
{claim_set}
WHERE id IN (
    SELECT id FROM durq_jobs INDEXED BY durq_jobs_ready_idx
    WHERE state IN ('queued', 'retry_wait')
      AND concurrency_key IS NULL
      AND queue = :queue
      AND run_at <= :now
      AND NOT EXISTS (SELECT 1 FROM durq_queues p WHERE p.name = :queue AND p.paused)
    ORDER BY priority, run_at, id
    LIMIT :limit
)
RETURNING {job_columns}

-- name: limit_budgets
-- Keys with budget left and a ready job in this queue, least recently served first; the
-- claim runs in a BEGIN IMMEDIATE transaction, so no other claimer reads them meanwhile.
SELECT key, ws,
       min(COALESCE(concurrency - running, :limit),
           COALESCE(rate - CASE WHEN window_start = ws THEN window_count ELSE 0 END, :limit))
           AS budget
FROM (SELECT l.*, CAST(:now / l.rate_window AS INTEGER) * l.rate_window AS ws
      FROM durq_limits l) l
WHERE (concurrency IS NULL OR running < concurrency)
  AND (rate IS NULL OR window_start <> ws OR window_count < rate)
  AND EXISTS (SELECT 1 FROM durq_jobs j
              WHERE j.state IN ('queued', 'retry_wait') AND j.concurrency_key IS NOT NULL
                AND j.queue = :queue AND j.concurrency_key = l.key AND j.run_at <= :now)
  AND NOT EXISTS (SELECT 1 FROM durq_queues p WHERE p.name = :queue AND p.paused)
ORDER BY claimed_at IS NOT NULL, claimed_at, key
LIMIT :limit

-- name: job_claim_keyed
-- INDEXED BY, as in job_claim: this key's ready jobs in claim order, stopping at LIMIT.
UPDATE durq_jobs
{claim_set}
WHERE id IN (
    SELECT id FROM durq_jobs INDEXED BY durq_jobs_limited_idx
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL
      AND queue = :queue AND concurrency_key = :key AND run_at <= :now
    ORDER BY priority, run_at, id
    LIMIT :limit
)
RETURNING {job_columns}

-- name: limit_spend
UPDATE durq_limits
SET running = running + :n,
    window_count = CASE WHEN window_start = :ws THEN window_count + :n ELSE :n END,
    window_start = :ws,
    claimed_at = :now
WHERE key = :key

-- name: job_claim_id
UPDATE durq_jobs
{claim_set}
WHERE id = :id AND state IN ('queued', 'retry_wait') AND run_at <= :now
RETURNING {job_columns}

-- name: job_finish
-- Fenced: only the owner named by claim_version may write. A pending cancel wins over
-- anything but success. A succeeded attempt is stored on the job row (runtime_ms beside
-- the claim's worker_id, attempted_at and claim_version); the driver writes the attempt
-- record of any other outcome in the same transaction.
UPDATE durq_jobs
SET state = CASE WHEN cancel_requested AND :to_state <> 'succeeded'
                 THEN 'cancelled' ELSE :to_state END,
    stage = NULL,
    attempt = attempt - :refund,
    claim_version = claim_version + :bump,
    run_at = CASE WHEN :delay IS NULL THEN run_at ELSE :now + :delay END,
    finished_at = CASE WHEN (cancel_requested AND :to_state <> 'succeeded')
                         OR :to_state IN ('succeeded', 'dead_letter', 'cancelled')
                       THEN :now END,
    lease_expires_at = NULL,
    last_error_code = :error_code,
    last_error = :error_message,
    result = :result,
    runtime_ms = :runtime_ms,
    updated_at = :now
WHERE id = :id AND claim_version = :claim_version AND state = 'running'
RETURNING {job_columns}

-- name: job_finish_many
-- Many fenced outcome writes in one statement (the worker's completer batches them), with
-- the same rules as job_finish. The request is one JSON array of [id, claim_version,
-- to_state, refund, bump, delay, error_code, error_message, result (JSON text),
-- runtime_ms] rows; a row whose lease was lost matches nothing and is absent from the
-- result.
UPDATE durq_jobs
SET state = CASE WHEN cancel_requested AND r_to_state <> 'succeeded'
                 THEN 'cancelled' ELSE r_to_state END,
    stage = NULL,
    attempt = attempt - r_refund,
    claim_version = claim_version + r_bump,
    run_at = CASE WHEN r_delay IS NULL THEN run_at ELSE :now + r_delay END,
    finished_at = CASE WHEN (cancel_requested AND r_to_state <> 'succeeded')
                         OR r_to_state IN ('succeeded', 'dead_letter', 'cancelled')
                       THEN :now END,
    lease_expires_at = NULL,
    last_error_code = r_error_code,
    last_error = r_error_message,
    result = r_result,
    runtime_ms = r_runtime_ms,
    updated_at = :now
FROM (SELECT json_extract(value, '$[0]') AS r_id, json_extract(value, '$[1]') AS r_claim_version,
             json_extract(value, '$[2]') AS r_to_state, json_extract(value, '$[3]') AS r_refund,
             json_extract(value, '$[4]') AS r_bump, json_extract(value, '$[5]') AS r_delay,
             json_extract(value, '$[6]') AS r_error_code,
             json_extract(value, '$[7]') AS r_error_message,
             json_extract(value, '$[8]') AS r_result,
             json_extract(value, '$[9]') AS r_runtime_ms
      FROM json_each(:batch))
WHERE durq_jobs.id = r_id AND durq_jobs.claim_version = r_claim_version
  AND durq_jobs.state = 'running'
RETURNING id, state, attempt, run_at, attempted_at, last_error_code, last_error

-- name: attempt_insert_many
-- The attempt records of a job_finish_many but its successes (stored on the job row), as
-- one JSON array of [job_id, attempt, claim_version, worker_id, started_at, runtime_ms,
-- outcome, error_code, error_message, traceback].
INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                           finished_at, runtime_ms, outcome, error_code, error_message,
                           traceback)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), :now,
       json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]'),
       json_extract(value, '$[8]'), json_extract(value, '$[9]')
FROM json_each(:batch)

-- name: attempt_insert
INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                           finished_at, runtime_ms, outcome, error_code, error_message,
                           traceback)
VALUES (:job_id, :attempt, :claim_version, :worker_id, :started_at, :now, :runtime_ms,
        :outcome, :error_code, :error_message, :traceback)

-- name: artifact_insert
INSERT INTO durq_artifacts (job_id, artifact_type, ref, payload, created_at)
VALUES (:job_id, :artifact_type, :ref, :payload, :now)

-- name: artifact_list
SELECT job_id, artifact_type, ref, payload, created_at
FROM durq_artifacts WHERE job_id = :job_id ORDER BY id

-- name: job_heartbeat
UPDATE durq_jobs
SET heartbeat_at = :now, lease_expires_at = :now + :lease_seconds
WHERE id = :id AND claim_version = :claim_version AND state = 'running'
RETURNING id, cancel_requested

-- name: job_set_stage
UPDATE durq_jobs
SET stage = :stage, updated_at = :now, heartbeat_at = :now,
    lease_expires_at = :now + :lease_seconds
WHERE id = :id AND claim_version = :claim_version AND state = 'running'
  AND stage IS :expected_stage
RETURNING id, cancel_requested

-- name: job_expired
SELECT {job_columns} FROM durq_jobs
WHERE state = 'running' AND lease_expires_at < :now
ORDER BY lease_expires_at
LIMIT :limit

-- name: job_cancel_ready
UPDATE durq_jobs
SET state = 'cancelled', finished_at = :now, updated_at = :now,
    last_error_code = 'cancelled', last_error = 'cancelled by request'
WHERE id = :id AND state IN (SELECT value FROM json_each(:from_states))
RETURNING {job_columns}

-- name: job_cancel_running
UPDATE durq_jobs SET cancel_requested = 1, updated_at = :now
WHERE id = :id AND state = 'running'
RETURNING {job_columns}

-- name: success_keep
-- Before job_requeue, in its transaction: a succeeded job's row holds its last attempt,
-- which the reset (and the next claim) would overwrite, so its record is stored first
-- (a stored record for that claim wins).
INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                           finished_at, runtime_ms, outcome)
SELECT id, attempt, claim_version, worker_id, attempted_at, finished_at, runtime_ms,
       'succeeded'
FROM durq_jobs
WHERE id = :id AND state = 'succeeded'
  AND state IN (SELECT value FROM json_each(:from_states))
ON CONFLICT (job_id, claim_version) DO NOTHING

-- name: job_requeue
UPDATE durq_jobs
SET state = 'queued', stage = NULL, attempt = 0, run_at = :now, finished_at = NULL,
    last_error_code = NULL, last_error = NULL, result = NULL, lease_expires_at = NULL,
    cancel_requested = 0, worker_id = NULL, runtime_ms = NULL, updated_at = :now
WHERE id = :id AND state IN (SELECT value FROM json_each(:from_states))
RETURNING {job_columns}

-- name: queue_ready_ages
SELECT queue, count(*) AS ready, :now - min(run_at) AS oldest_age
FROM durq_jobs
WHERE state IN ('queued', 'retry_wait') AND run_at <= :now
GROUP BY queue

-- name: queue_ready_age_at
-- The age at a rank among ready jobs, youngest first (nearest-rank percentile).
SELECT :now - run_at AS age FROM durq_jobs
WHERE queue = :queue AND state IN ('queued', 'retry_wait') AND run_at <= :now
ORDER BY run_at DESC
LIMIT 1 OFFSET :rank

-- name: queue_owner_counts
-- One owner's jobs per queue and state, and how many of them are ready to run now.
SELECT queue, state, count(*) AS n,
       sum(CASE WHEN state IN ('queued', 'retry_wait') AND run_at <= :now THEN 1 ELSE 0 END)
           AS ready
FROM durq_jobs WHERE created_by = :owner GROUP BY queue, state

-- name: queue_set_paused
INSERT INTO durq_queues (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING name, paused, updated_at

-- name: db_now
SELECT :now AS now
