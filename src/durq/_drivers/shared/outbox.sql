-- Outbox and secret blocks whose SQL is the same in every dialect.

-- name: outbox_forget_job
DELETE FROM durq_outbox WHERE job_id = :id

-- name: outbox_counts
SELECT state, count(*) AS n, COALESCE(sum(attempt), 0) AS attempts
FROM durq_outbox GROUP BY state

-- name: secret_get
SELECT job_id, owner, credential_version, secrets_encrypted, secrets_dek_wrapped,
       secrets_kek_id, secrets_encryption_version, refresh_url, refresh_attempts,
       max_refresh_attempts
FROM durq_job_secrets WHERE job_id = :job_id

-- name: secret_by_kek
SELECT job_id, owner, credential_version, secrets_encrypted, secrets_dek_wrapped,
       secrets_kek_id, secrets_encryption_version, refresh_url, refresh_attempts,
       max_refresh_attempts
FROM durq_job_secrets WHERE secrets_kek_id = :kek_id AND job_id > :after_id
ORDER BY job_id
LIMIT :limit
