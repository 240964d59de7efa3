-- The outbox, job secrets and webhook nonces (SQLite). Time is :now (epoch seconds).

-- name: outbox_columns
id, event_id, job_id, owner, url, event_type, payload, state,
attempt, claim_version, worker_id, next_attempt_at, lease_expires_at, created_at,
updated_at, delivered_at, last_status, last_error

-- name: outbox_claim
-- The job claim's shape (one write transaction): ready rows in due order, each under a
-- fresh claim_version and lease. An event is ready only at the head of its job: while an
-- earlier event of the job is pending or delivering, the later ones wait (order per job).
UPDATE durq_outbox
SET state = 'delivering', worker_id = :worker_id, attempt = attempt + 1,
    claim_version = claim_version + 1, heartbeat_at = :now, updated_at = :now,
    lease_expires_at = :now + :lease_seconds
WHERE id IN (
    SELECT id FROM durq_outbox o
    WHERE state = 'pending' AND next_attempt_at <= :now
      AND NOT EXISTS (SELECT 1 FROM durq_outbox e
                      WHERE e.job_id = o.job_id AND e.id < o.id
                        AND e.state IN ('pending', 'delivering'))
    ORDER BY next_attempt_at, id
    LIMIT :limit
)
RETURNING {outbox_columns}

-- name: outbox_heartbeat
UPDATE durq_outbox
SET heartbeat_at = :now, lease_expires_at = :now + :lease_seconds
WHERE id = :id AND claim_version = :claim_version AND state = 'delivering'
RETURNING id

-- name: outbox_finish
-- Fenced like a job's finish: only the holder named by claim_version writes.
UPDATE durq_outbox
SET state = :to_state,
    claim_version = claim_version + :bump,
    next_attempt_at = CASE WHEN :delay IS NULL THEN next_attempt_at ELSE :now + :delay END,
    lease_expires_at = NULL,
    delivered_at = CASE WHEN :to_state = 'delivered' THEN :now END,
    last_status = :status,
    last_error = :error,
    updated_at = :now
WHERE id = :id AND claim_version = :claim_version AND state = 'delivering'
RETURNING {outbox_columns}

-- name: outbox_expired
SELECT {outbox_columns} FROM durq_outbox
WHERE state = 'delivering' AND lease_expires_at < :now
ORDER BY lease_expires_at
LIMIT :limit

-- name: outbox_get
SELECT {outbox_columns} FROM durq_outbox WHERE event_id = :event_id

-- name: outbox_list
SELECT {outbox_columns} FROM durq_outbox
WHERE (:job_id IS NULL OR job_id = :job_id)
  AND (:state IS NULL OR state = :state)
  AND (:after_id IS NULL OR id > :after_id)
ORDER BY id
LIMIT :limit

-- name: outbox_redeliver
UPDATE durq_outbox
SET state = 'pending', attempt = 0, next_attempt_at = :now, lease_expires_at = NULL,
    delivered_at = NULL, updated_at = :now
WHERE event_id = :event_id AND state IN ('dead_letter', 'delivered')
RETURNING {outbox_columns}

-- name: outbox_latencies
-- Seconds from an event's creation to its delivery (the latest 10,000).
SELECT delivered_at - created_at AS seconds FROM durq_outbox WHERE state = 'delivered'
ORDER BY id DESC
LIMIT 10000

-- name: outbox_notify
-- SQLite delivery workers poll; nothing to wake.
SELECT 1 AS ok

-- name: secret_insert
INSERT INTO durq_job_secrets (job_id, owner, credential_version, secrets_encrypted,
                              secrets_dek_wrapped, secrets_kek_id, secrets_encryption_version,
                              refresh_url, max_refresh_attempts, updated_at)
VALUES (:job_id, :owner, :credential_version, :encrypted, :dek_wrapped, :kek_id,
        :encryption_version, :refresh_url, :max_refresh_attempts, :now)

-- name: secret_replace
UPDATE durq_job_secrets
SET credential_version = :credential_version, secrets_encrypted = :encrypted,
    secrets_dek_wrapped = :dek_wrapped, secrets_kek_id = :kek_id,
    secrets_encryption_version = :encryption_version, updated_at = :now
WHERE job_id = :job_id AND credential_version = :expected_version
RETURNING job_id

-- name: secret_rewrap
UPDATE durq_job_secrets
SET secrets_dek_wrapped = :dek_wrapped, secrets_kek_id = :kek_id, updated_at = :now
WHERE job_id = :job_id AND secrets_kek_id = :old_kek_id
RETURNING job_id

-- name: secret_refresh_attempt
UPDATE durq_job_secrets
SET refresh_attempts = refresh_attempts + 1, updated_at = :now
WHERE job_id = :job_id
  AND EXISTS (SELECT 1 FROM durq_jobs j WHERE j.id = :job_id
              AND j.claim_version = :claim_version AND j.state = 'running')
RETURNING refresh_attempts

-- name: nonce_insert
INSERT INTO durq_webhook_nonces (nonce, expires_at) VALUES (:nonce, :now + :ttl)
ON CONFLICT (nonce) DO UPDATE SET expires_at = excluded.expires_at
WHERE durq_webhook_nonces.expires_at < :now
RETURNING nonce

-- name: nonce_prune
DELETE FROM durq_webhook_nonces WHERE expires_at < :now
