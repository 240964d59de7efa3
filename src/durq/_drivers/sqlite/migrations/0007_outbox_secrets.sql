-- durq schema 0006 (SQLite): the transactional outbox, job secrets, webhook nonces.
-- (A statement ends where a line ends with a semicolon: trigger bodies keep theirs inside.)

-- Where a job's state changes are announced; NULL (the common case) costs one condition.
ALTER TABLE durq_jobs ADD COLUMN webhook_url TEXT;

-- Events to deliver, under the same lease protocol as jobs: claimed with a fresh
-- claim_version, a lease kept by heartbeats, every write fenced, expired leases reclaimed.
CREATE TABLE durq_outbox (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id          TEXT NOT NULL UNIQUE DEFAULT (lower(hex(randomblob(4))) || '-'
                          || lower(hex(randomblob(2))) || '-4'
                          || substr(lower(hex(randomblob(2))), 2) || '-'
                          || substr('89ab', 1 + (abs(random()) % 4), 1)
                          || substr(lower(hex(randomblob(2))), 2) || '-'
                          || lower(hex(randomblob(6)))),
    job_id            INTEGER NOT NULL,
    owner             TEXT,
    url               TEXT NOT NULL,
    event_type        TEXT NOT NULL,
    payload           TEXT NOT NULL,
    state             TEXT NOT NULL DEFAULT 'pending',
    attempt           INTEGER NOT NULL DEFAULT 0,
    claim_version     INTEGER NOT NULL DEFAULT 0,
    worker_id         TEXT,
    next_attempt_at   REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at  REAL,
    heartbeat_at      REAL,
    created_at        REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at        REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    delivered_at      REAL,
    last_status       INTEGER,
    last_error        TEXT,
    CONSTRAINT durq_outbox_state_check CHECK (
        state IN ('pending', 'delivering', 'delivered', 'dead_letter'))
);
CREATE INDEX durq_outbox_ready_idx ON durq_outbox (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX durq_outbox_open_idx ON durq_outbox (job_id, id)
    WHERE state IN ('pending', 'delivering');
CREATE INDEX durq_outbox_lease_idx ON durq_outbox (lease_expires_at) WHERE state = 'delivering';
CREATE INDEX durq_outbox_job_idx ON durq_outbox (job_id, id);
CREATE INDEX durq_outbox_state_idx ON durq_outbox (state, id);

-- The event is written by the database in the transaction that changes the job, so no code
-- path can change a state and forget its event, and a rolled-back change leaves none.
CREATE TRIGGER durq_outbox_on_insert AFTER INSERT ON durq_jobs
FOR EACH ROW WHEN NEW.webhook_url IS NOT NULL
BEGIN
    INSERT INTO durq_outbox (job_id, owner, url, event_type, payload)
    VALUES (NEW.id, NEW.created_by, NEW.webhook_url, 'job.' || NEW.state,
            json_object('job_id', NEW.id, 'task', NEW.task, 'queue', NEW.queue,
                        'state', NEW.state, 'stage', NEW.stage, 'attempt', NEW.attempt,
                        'max_attempts', NEW.max_attempts)); END;

CREATE TRIGGER durq_outbox_on_change AFTER UPDATE OF state, stage ON durq_jobs
FOR EACH ROW WHEN NEW.webhook_url IS NOT NULL
    AND (OLD.state IS NOT NEW.state OR OLD.stage IS NOT NEW.stage)
BEGIN
    INSERT INTO durq_outbox (job_id, owner, url, event_type, payload)
    VALUES (NEW.id, NEW.created_by, NEW.webhook_url,
            CASE WHEN OLD.state = 'running' AND NEW.state = 'running'
                 THEN 'job.stage' ELSE 'job.' || NEW.state END,
            CASE NEW.state
            WHEN 'succeeded' THEN json_object(
                'job_id', NEW.id, 'task', NEW.task, 'queue', NEW.queue, 'state', NEW.state,
                'stage', NEW.stage, 'attempt', NEW.attempt, 'max_attempts', NEW.max_attempts,
                'result', json(NEW.result))
            WHEN 'dead_letter' THEN json_object(
                'job_id', NEW.id, 'task', NEW.task, 'queue', NEW.queue, 'state', NEW.state,
                'stage', NEW.stage, 'attempt', NEW.attempt, 'max_attempts', NEW.max_attempts,
                'error', json_object('code', NEW.last_error_code, 'message', NEW.last_error,
                                     'attempt', NEW.attempt))
            WHEN 'retry_wait' THEN json_object(
                'job_id', NEW.id, 'task', NEW.task, 'queue', NEW.queue, 'state', NEW.state,
                'stage', NEW.stage, 'attempt', NEW.attempt, 'max_attempts', NEW.max_attempts,
                'error_code', NEW.last_error_code, 'run_at', NEW.run_at)
            ELSE json_object(
                'job_id', NEW.id, 'task', NEW.task, 'queue', NEW.queue, 'state', NEW.state,
                'stage', NEW.stage, 'attempt', NEW.attempt, 'max_attempts', NEW.max_attempts)
            END); END;

-- A job's secrets, sealed by envelope encryption: the plaintext is never stored.
CREATE TABLE durq_job_secrets (
    job_id                INTEGER PRIMARY KEY,
    owner                 TEXT,
    credential_version    INTEGER NOT NULL DEFAULT 1,
    secrets_encrypted     TEXT NOT NULL,
    secrets_dek_wrapped   TEXT NOT NULL,
    secrets_kek_id        TEXT NOT NULL,
    secrets_encryption_version INTEGER NOT NULL,
    refresh_url           TEXT,
    refresh_attempts      INTEGER NOT NULL DEFAULT 0,
    max_refresh_attempts  INTEGER NOT NULL DEFAULT 3,
    updated_at            REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);
CREATE INDEX durq_job_secrets_kek_idx ON durq_job_secrets (secrets_kek_id);

-- Nonces a webhook receiver has seen, for its replay window.
CREATE TABLE durq_webhook_nonces (
    nonce       TEXT PRIMARY KEY,
    expires_at  REAL NOT NULL
);
CREATE INDEX durq_webhook_nonces_expires_idx ON durq_webhook_nonces (expires_at);
