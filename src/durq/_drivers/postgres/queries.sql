-- Core job operations (PostgreSQL). Time is the database's clock: now().

-- name: job_columns
id, queue, task, CAST(args AS text) AS args, state, stage, priority, attempt, max_attempts,
claim_version, worker_id, run_at, created_at, updated_at, attempted_at, finished_at,
lease_expires_at, heartbeat_at, last_error_code, last_error, CAST(result AS text) AS result,
CAST(retry_policy AS text) AS retry_policy, cancel_requested, created_by, idempotency_key,
breaker_key, concurrency_key

-- name: job_insert_row
-- Only the id and the clock come back: the rest of the Job is what was sent.
INSERT INTO durq_jobs (queue, task, args, priority, run_at, max_attempts, retry_policy,
                       created_by, idempotency_key, breaker_key, concurrency_key,
                       trace_context, webhook_url)
VALUES (:queue, :task, CAST(:args AS jsonb), :priority,
        COALESCE(CAST(:run_at AS timestamptz), now() + make_interval(secs => CAST(:delay AS float8))),
        :max_attempts, CAST(:retry_policy AS jsonb), :created_by, :idempotency_key,
        CAST(:breaker_key AS text), CAST(:concurrency_key AS text), :trace_context,
        CAST(:webhook_url AS text))
RETURNING id, queue, run_at, created_at

-- name: job_insert
-- The NOTIFY is delivered at commit, once per queue per transaction (PostgreSQL folds
-- identical notifications), so idle workers wake without polling.
WITH ins AS (
{job_insert_row}
)
SELECT ins.*, pg_notify('durq_jobs', ins.queue) AS notified FROM ins

-- name: job_insert_quiet
-- The insert without its NOTIFY: a single enqueue's wake-up is then sent after its commit,
-- together with those of the other enqueues of a few milliseconds (durq._engine.notices).
{job_insert_row}

-- name: job_insert_many
INSERT INTO durq_jobs (queue, task, args, priority, run_at, max_attempts, retry_policy, created_by,
                       trace_context)
SELECT u.queue, u.task, CAST(u.args AS jsonb), u.priority,
       COALESCE(u.run_at, now() + make_interval(secs => u.delay)),
       u.max_attempts, CAST(u.retry_policy AS jsonb), u.created_by, u.trace_context
FROM unnest(CAST(:queues AS text[]), CAST(:tasks AS text[]), CAST(:args AS text[]),
            CAST(:priorities AS int[]), CAST(:run_ats AS timestamptz[]),
            CAST(:delays AS float8[]), CAST(:max_attempts AS int[]),
            CAST(:retry_policies AS text[]), CAST(:created_bys AS text[]),
            CAST(:trace_contexts AS text[]))
     AS u(queue, task, args, priority, run_at, delay, max_attempts, retry_policy, created_by,
          trace_context)
RETURNING {job_columns}

-- name: job_ids_reserve
-- Ids for a COPY, in order, with the transaction's clock (the rows' created_at and run_at).
SELECT now() AS now,
       ARRAY(SELECT nextval(pg_get_serial_sequence('durq_jobs', 'id'))
             FROM generate_series(1, CAST(:count AS int))) AS ids

-- name: job_copy_in
COPY durq_jobs (id, queue, task, args, priority, max_attempts, retry_policy, created_by,
               trace_context)
FROM STDIN

-- name: job_trace_context
SELECT id, trace_context FROM durq_jobs
WHERE id = ANY(CAST(:ids AS bigint[])) AND trace_context IS NOT NULL

-- name: job_notify
SELECT pg_notify('durq_jobs', q) FROM unnest(CAST(:queues AS text[])) AS q

-- name: job_delete
-- Attempts have no foreign key (it cost a quarter of every finish): delete them here.
WITH attempts AS (DELETE FROM durq_attempts WHERE job_id = :id)
DELETE FROM durq_jobs WHERE id = :id

-- name: idem_get
SELECT job_id, args_hash, expires_at <= now() AS expired
FROM durq_idempotency WHERE scope = :scope AND key = :key
FOR UPDATE

-- name: idem_insert
INSERT INTO durq_idempotency (scope, key, args_hash, job_id, expires_at)
VALUES (:scope, :key, :args_hash, :job_id, now() + make_interval(secs => CAST(:ttl AS float8)))
ON CONFLICT (scope, key) DO NOTHING
RETURNING job_id

-- name: job_filter
-- The listing filters, each ignored when its parameter is NULL.
WHERE (CAST(:states AS text[]) IS NULL OR state = ANY(CAST(:states AS text[])))
  AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
  AND (CAST(:task AS text) IS NULL OR task = CAST(:task AS text))
  AND (CAST(:created_by AS text) IS NULL OR created_by = CAST(:created_by AS text))
  AND (CAST(:created_after AS timestamptz) IS NULL OR created_at >= CAST(:created_after AS timestamptz))
  AND (CAST(:created_before AS timestamptz) IS NULL OR created_at < CAST(:created_before AS timestamptz))
  AND (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))

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
    attempted_at = now(), heartbeat_at = now(), updated_at = now(),
    lease_expires_at = now() + make_interval(secs => CAST(:lease_seconds AS float8)),
    cancel_requested = false

-- name: job_claim
-- One statement: pick ready rows of one queue by priority and age, skip rows other workers
-- hold. One queue per statement keeps it an ordered scan of durq_jobs_ready_idx that stops
-- at LIMIT (a list of queues, or a join on the pause flag, would sort the whole backlog).
-- `id = ANY(ARRAY(...))` makes the update fetch the picked rows by primary key; with
-- `id IN (SELECT ...)` the planner may hash-join against a scan of the whole table.
--
-- Jobs with a concurrency key come first, from their own index, one key at a time: `lim`
-- locks each key that has budget left and a ready job here (SKIP LOCKED: a key another
-- claimer is spending is skipped, never waited for, never spent twice; the locked row is
-- its latest version, so the budget read is current), `keyed` takes at most that budget
-- of the key's jobs, and `spent` books them in the same statement. Without limit rows
-- (the common case) `lim` reads an empty table and the claim is the plain ready scan.
WITH lim AS (
    SELECT l.key, w.ws,
           LEAST(COALESCE(l.concurrency - l.running, CAST(:limit AS int)),
                 COALESCE(l.rate - CASE WHEN l.window_start = w.ws THEN l.window_count ELSE 0 END,
                          CAST(:limit AS int))) AS budget
    FROM durq_limits l
    CROSS JOIN LATERAL (
        SELECT floor(CAST(EXTRACT(EPOCH FROM now()) AS float8) / l.rate_window)
               * l.rate_window AS ws
    ) w
    WHERE (l.concurrency IS NULL OR l.running < l.concurrency)
      AND (l.rate IS NULL OR l.window_start <> w.ws OR l.window_count < l.rate)
      AND EXISTS (SELECT 1 FROM durq_jobs j
                  WHERE j.state IN ('queued', 'retry_wait') AND j.concurrency_key IS NOT NULL
                    AND j.queue = :queue AND j.concurrency_key = l.key AND j.run_at <= now())
      AND NOT EXISTS (SELECT 1 FROM durq_queues p WHERE p.name = :queue AND p.paused)
    ORDER BY l.claimed_at NULLS FIRST, l.key
    LIMIT :limit
    FOR UPDATE OF l SKIP LOCKED
), keyed AS (
    SELECT k.id, lim.key FROM lim
    CROSS JOIN LATERAL (
        SELECT id FROM durq_jobs
        WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL
          AND queue = :queue AND concurrency_key = lim.key AND run_at <= now()
        ORDER BY priority, run_at, id
        LIMIT lim.budget
        FOR UPDATE SKIP LOCKED
    ) k
    LIMIT :limit
), next AS (
    SELECT id FROM durq_jobs
    WHERE state IN ('queued', 'retry_wait')
      AND concurrency_key IS NULL
      AND queue = :queue
      AND run_at <= now()
      AND NOT EXISTS (SELECT 1 FROM durq_queues p WHERE p.name = :queue AND p.paused)
    ORDER BY priority, run_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
), spent AS (
    UPDATE durq_limits l
    SET running = l.running + s.n,
        window_count = CASE WHEN l.window_start = s.ws THEN l.window_count + s.n ELSE s.n END,
        window_start = s.ws,
        claimed_at = now()
    FROM (SELECT key, min(lim.ws) AS ws, count(*) AS n
          FROM keyed JOIN lim USING (key) GROUP BY key) s
    WHERE l.key = s.key
)
UPDATE durq_jobs
{claim_set}
WHERE id = ANY(ARRAY(SELECT id FROM keyed UNION ALL (SELECT id FROM next) LIMIT :limit))
RETURNING {job_columns}

-- name: job_claim_id
-- Claim one named job if it is ready (sync execution, testing helpers).
UPDATE durq_jobs
{claim_set}
WHERE id = :id AND state IN ('queued', 'retry_wait') AND run_at <= now()
RETURNING {job_columns}

-- name: job_finish
-- Fenced: only the owner named by claim_version may write. A pending cancel wins over
-- anything but success. A succeeded attempt is stored on the job row (runtime_ms beside
-- the claim's worker_id, attempted_at and claim_version); any other outcome writes its
-- attempt record in the same statement.
WITH done AS (
    UPDATE durq_jobs
    SET state = CASE WHEN cancel_requested AND CAST(:to_state AS text) <> 'succeeded'
                     THEN 'cancelled' ELSE CAST(:to_state AS text) END,
        stage = NULL,
        attempt = attempt - CAST(:refund AS int),
        claim_version = claim_version + CAST(:bump AS int),
        run_at = CASE WHEN CAST(:delay AS float8) IS NULL THEN run_at
                      ELSE now() + make_interval(secs => CAST(:delay AS float8)) END,
        finished_at = CASE WHEN (cancel_requested AND CAST(:to_state AS text) <> 'succeeded')
                             OR CAST(:to_state AS text) IN ('succeeded', 'dead_letter', 'cancelled')
                           THEN now() END,
        lease_expires_at = NULL,
        last_error_code = CAST(:error_code AS text),
        last_error = CAST(:error_message AS text),
        result = CAST(:result AS jsonb),
        runtime_ms = CAST(:runtime_ms AS int),
        updated_at = now()
    WHERE id = :id AND claim_version = :claim_version AND state = 'running'
    RETURNING {job_columns}
), rec AS (
    INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                               finished_at, runtime_ms, outcome, error_code, error_message,
                               traceback)
    SELECT id, attempt + CAST(:refund AS int), :claim_version, CAST(:worker_id AS text),
           attempted_at, now(), CAST(:runtime_ms AS int),
           CASE WHEN state = 'cancelled' THEN 'cancelled' ELSE CAST(:outcome AS text) END,
           CAST(:error_code AS text), CAST(:error_message AS text), CAST(:traceback AS text)
    FROM done WHERE state <> 'succeeded'
)
SELECT * FROM done

-- name: job_finish_many
-- Many fenced outcome writes in one statement (the worker's completer batches them).
-- Each request row names a job and the claim_version it holds; a row whose lease was lost
-- matches nothing and is absent from the result. Same rules as job_finish: a success is
-- stored on the job row, the other attempt records are written in the same statement. It
-- returns only what the worker reports.
-- The request is one JSON array of [id, claim_version, to_state, refund, bump, delay,
-- error_code, error_message, result, worker_id, runtime_ms, outcome, traceback] rows: one json.dumps
-- on the client, where twelve typed arrays cost psycopg ~8 µs a job to encode.
-- The plan reads the request and fetches each named row by primary key, whatever the
-- statistics say: tests/perf/test_claim_plan.py checks it, and the cached generic plan that
-- psycopg's prepared statement soon gets. (With twelve typed arrays, and statistics taken
-- when no job ran, the planner once re-read the request for every running row instead:
-- 9 ms rather than 2 ms per 100 jobs.)
WITH req AS (
    SELECT CAST(e->>0 AS bigint) AS r_id, CAST(e->>1 AS bigint) AS r_version,
           e->>2 AS r_to_state, CAST(e->>3 AS int) AS r_refund, CAST(e->>4 AS int) AS r_bump,
           CAST(e->>5 AS float8) AS r_delay, e->>6 AS r_error_code,
           e->>7 AS r_error_message, NULLIF(e->8, 'null') AS r_result, e->>9 AS r_worker_id,
           CAST(e->>10 AS int) AS r_runtime_ms, e->>11 AS r_outcome, e->>12 AS r_traceback
    FROM jsonb_array_elements(CAST(:batch AS jsonb)) AS e
), done AS (
    UPDATE durq_jobs
    SET state = CASE WHEN cancel_requested AND r_to_state <> 'succeeded'
                     THEN 'cancelled' ELSE r_to_state END,
        stage = NULL,
        attempt = attempt - r_refund,
        claim_version = claim_version + r_bump,
        run_at = CASE WHEN r_delay IS NULL THEN run_at
                      ELSE now() + make_interval(secs => r_delay) END,
        finished_at = CASE WHEN (cancel_requested AND r_to_state <> 'succeeded')
                             OR r_to_state IN ('succeeded', 'dead_letter', 'cancelled')
                           THEN now() END,
        lease_expires_at = NULL,
        last_error_code = r_error_code,
        last_error = r_error_message,
        result = r_result,
        runtime_ms = r_runtime_ms,
        updated_at = now()
    FROM req
    WHERE id = r_id AND claim_version = r_version AND state = 'running'
    RETURNING id, state, attempt, run_at, attempted_at, last_error_code, last_error,
              r_refund, r_version, r_worker_id, r_runtime_ms, r_outcome, r_traceback
), rec AS (
    INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                               finished_at, runtime_ms, outcome, error_code, error_message,
                               traceback)
    SELECT id, attempt + r_refund, r_version, r_worker_id, attempted_at, now(), r_runtime_ms,
           CASE WHEN state = 'cancelled' THEN 'cancelled' ELSE r_outcome END,
           last_error_code, last_error, r_traceback
    FROM done WHERE state <> 'succeeded'
)
SELECT id, state, run_at, last_error_code, last_error FROM done

-- name: artifact_insert
INSERT INTO durq_artifacts (job_id, artifact_type, ref, payload)
VALUES (:job_id, :artifact_type, :ref, CAST(:payload AS jsonb))

-- name: artifact_list
SELECT job_id, artifact_type, ref, CAST(payload AS text) AS payload, created_at
FROM durq_artifacts WHERE job_id = :job_id ORDER BY id

-- name: job_heartbeat
UPDATE durq_jobs
SET heartbeat_at = now(),
    lease_expires_at = now() + make_interval(secs => CAST(:lease_seconds AS float8))
WHERE id = :id AND claim_version = :claim_version AND state = 'running'
RETURNING id, cancel_requested

-- name: job_heartbeat_many
UPDATE durq_jobs j
SET heartbeat_at = now(),
    lease_expires_at = now() + make_interval(secs => CAST(:lease_seconds AS float8))
FROM unnest(CAST(:ids AS bigint[]), CAST(:claim_versions AS bigint[])) AS f(id, claim_version)
WHERE j.id = f.id AND j.claim_version = f.claim_version AND j.state = 'running'
RETURNING j.id, j.cancel_requested

-- name: job_set_stage
UPDATE durq_jobs
SET stage = :stage, updated_at = now(), heartbeat_at = now(),
    lease_expires_at = now() + make_interval(secs => CAST(:lease_seconds AS float8))
WHERE id = :id AND claim_version = :claim_version AND state = 'running'
  AND stage IS NOT DISTINCT FROM CAST(:expected_stage AS text)
RETURNING id, cancel_requested

-- name: job_expired
-- Running jobs whose lease ran out; locked so two reclaimers never take the same row.
SELECT {job_columns} FROM durq_jobs
WHERE state = 'running' AND lease_expires_at < now()
ORDER BY lease_expires_at
LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: job_cancel_ready
UPDATE durq_jobs
SET state = 'cancelled', finished_at = now(), updated_at = now(),
    last_error_code = 'cancelled', last_error = 'cancelled by request'
WHERE id = :id AND state = ANY(CAST(:from_states AS text[]))
RETURNING {job_columns}

-- name: job_cancel_running
UPDATE durq_jobs SET cancel_requested = true, updated_at = now()
WHERE id = :id AND state = 'running'
RETURNING {job_columns}

-- name: job_requeue
-- A succeeded job's row holds its last attempt, which the reset (and the next claim) would
-- overwrite: its record is stored first, in the same statement, from the row as locked
-- (`old`: locked and read before the update; a stored record for that claim wins).
WITH old AS (
    SELECT id AS old_id, state AS old_state, attempt AS old_attempt,
           claim_version AS old_claim_version, worker_id AS old_worker_id,
           attempted_at AS old_attempted_at, finished_at AS old_finished_at,
           runtime_ms AS old_runtime_ms
    FROM durq_jobs
    WHERE id = :id AND state = ANY(CAST(:from_states AS text[]))
    FOR UPDATE
), kept AS (
    INSERT INTO durq_attempts (job_id, attempt, claim_version, worker_id, started_at,
                               finished_at, runtime_ms, outcome)
    SELECT old_id, old_attempt, old_claim_version, old_worker_id, old_attempted_at,
           old_finished_at, old_runtime_ms, 'succeeded'
    FROM old WHERE old_state = 'succeeded'
    ON CONFLICT (job_id, claim_version) DO NOTHING
)
UPDATE durq_jobs
SET state = 'queued', stage = NULL, attempt = 0, run_at = now(), finished_at = NULL,
    last_error_code = NULL, last_error = NULL, result = NULL, lease_expires_at = NULL,
    cancel_requested = false, worker_id = NULL, runtime_ms = NULL, updated_at = now()
FROM old
WHERE id = old_id AND state = ANY(CAST(:from_states AS text[]))
RETURNING {job_columns}

-- name: queue_ready_ages
-- Through the ready and limited indexes (each part names its index's exact condition), so
-- finished jobs are never read however many are retained.
SELECT queue,
       count(*) AS ready,
       EXTRACT(EPOCH FROM now() - min(run_at)) AS oldest_age,
       EXTRACT(EPOCH FROM percentile_disc(0.95) WITHIN GROUP (ORDER BY now() - run_at)) AS p95_age
FROM (
    SELECT queue, run_at FROM durq_jobs
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NULL AND run_at <= now()
    UNION ALL
    SELECT queue, run_at FROM durq_jobs
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL AND run_at <= now()
) ready
GROUP BY queue

-- name: queue_owner_counts
-- One owner's jobs per queue and state, and how many of them are ready to run now.
SELECT queue, state, count(*) AS n,
       count(*) FILTER (WHERE state IN ('queued', 'retry_wait') AND run_at <= now()) AS ready
FROM durq_jobs WHERE created_by = :owner GROUP BY queue, state

-- name: queue_set_paused
INSERT INTO durq_queues (name, paused) VALUES (:name, :paused)
ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, updated_at = now()
RETURNING name, paused, updated_at

-- name: db_now
SELECT now() AS now
