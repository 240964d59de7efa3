-- durq schema 0006 (PostgreSQL): the transactional outbox, job secrets, webhook nonces.

-- Where a job's state changes are announced; NULL (the common case) costs one condition.
ALTER TABLE durq_jobs ADD COLUMN webhook_url TEXT;

-- Events to deliver, under the same lease protocol as jobs: claimed with a fresh
-- claim_version, a lease kept by heartbeats, every write fenced, expired leases reclaimed.
CREATE TABLE durq_outbox (
    id                BIGSERIAL PRIMARY KEY,
    event_id          TEXT NOT NULL UNIQUE DEFAULT CAST(gen_random_uuid() AS text),
    job_id            BIGINT NOT NULL,
    owner             TEXT,
    url               TEXT NOT NULL,
    event_type        TEXT NOT NULL,
    payload           JSONB NOT NULL,
    state             TEXT NOT NULL DEFAULT 'pending',
    attempt           INTEGER NOT NULL DEFAULT 0,
    claim_version     BIGINT NOT NULL DEFAULT 0,
    worker_id         TEXT,
    next_attempt_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_expires_at  TIMESTAMPTZ,
    heartbeat_at      TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    delivered_at      TIMESTAMPTZ,
    last_status       INTEGER,
    last_error        TEXT,
    CONSTRAINT durq_outbox_state_check CHECK (
        state IN ('pending', 'delivering', 'delivered', 'dead_letter'))
);
-- The claim: pending events by due time; the head check reads undelivered events per job.
CREATE INDEX durq_outbox_ready_idx ON durq_outbox (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX durq_outbox_open_idx ON durq_outbox (job_id, id)
    WHERE state IN ('pending', 'delivering');
CREATE INDEX durq_outbox_lease_idx ON durq_outbox (lease_expires_at) WHERE state = 'delivering';
CREATE INDEX durq_outbox_job_idx ON durq_outbox (job_id, id);
CREATE INDEX durq_outbox_state_idx ON durq_outbox (state, id);

-- The event is written by the database in the transaction that changes the job, so no code
-- path (enqueue, claim, stage, finish, reclaim, cancel, requeue) can change a state and
-- forget its event, and a rolled-back change leaves none.
CREATE FUNCTION durq_outbox_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO durq_outbox (job_id, owner, url, event_type, payload)
    VALUES (
        NEW.id, NEW.created_by, NEW.webhook_url,
        CASE WHEN TG_OP = 'UPDATE' AND OLD.state = 'running' AND NEW.state = 'running'
             THEN 'job.stage' ELSE 'job.' || NEW.state END,
        jsonb_build_object('job_id', NEW.id, 'task', NEW.task, 'queue', NEW.queue,
                           'state', NEW.state, 'stage', NEW.stage, 'attempt', NEW.attempt,
                           'max_attempts', NEW.max_attempts)
        || CASE WHEN NEW.state = 'succeeded'
                THEN jsonb_build_object('result', NEW.result)
                WHEN NEW.state = 'dead_letter'
                THEN jsonb_build_object('error', jsonb_build_object(
                         'code', NEW.last_error_code, 'message', NEW.last_error,
                         'attempt', NEW.attempt))
                WHEN NEW.state = 'retry_wait'
                THEN jsonb_build_object('error_code', NEW.last_error_code,
                                        'run_at', NEW.run_at)
                ELSE '{}'::jsonb END);
    PERFORM pg_notify('durq_jobs', '__outbox__');
    RETURN NULL;
END $$;

CREATE TRIGGER durq_outbox_on_insert AFTER INSERT ON durq_jobs
    FOR EACH ROW WHEN (NEW.webhook_url IS NOT NULL) EXECUTE FUNCTION durq_outbox_record();
CREATE TRIGGER durq_outbox_on_change AFTER UPDATE OF state, stage ON durq_jobs
    FOR EACH ROW WHEN (NEW.webhook_url IS NOT NULL AND (OLD.state IS DISTINCT FROM NEW.state
                       OR OLD.stage IS DISTINCT FROM NEW.stage))
    EXECUTE FUNCTION durq_outbox_record();

-- A job's secrets, sealed by envelope encryption: the plaintext is never stored.
CREATE TABLE durq_job_secrets (
    job_id                BIGINT PRIMARY KEY,
    owner                 TEXT,
    credential_version    INTEGER NOT NULL DEFAULT 1,
    secrets_encrypted     TEXT NOT NULL,
    secrets_dek_wrapped   TEXT NOT NULL,
    secrets_kek_id        TEXT NOT NULL,
    secrets_encryption_version INTEGER NOT NULL,
    refresh_url           TEXT,
    refresh_attempts      INTEGER NOT NULL DEFAULT 0,
    max_refresh_attempts  INTEGER NOT NULL DEFAULT 3,
    updated_at            TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX durq_job_secrets_kek_idx ON durq_job_secrets (secrets_kek_id);

-- Nonces a webhook receiver has seen, for its replay window.
CREATE TABLE durq_webhook_nonces (
    nonce       TEXT PRIMARY KEY,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX durq_webhook_nonces_expires_idx ON durq_webhook_nonces (expires_at);
