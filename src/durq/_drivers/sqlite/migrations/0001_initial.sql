-- durq schema 0001 (SQLite). Numbered alike in both dialects.
-- Times are REAL seconds since the Unix epoch (UTC); JSON is TEXT.

CREATE TABLE durq_jobs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    queue              TEXT NOT NULL,
    task               TEXT NOT NULL,
    args               TEXT NOT NULL DEFAULT '{}',
    state              TEXT NOT NULL DEFAULT 'queued',
    stage              TEXT,
    priority           INTEGER NOT NULL DEFAULT 0,
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL DEFAULT 20,
    claim_version      INTEGER NOT NULL DEFAULT 0,
    worker_id          TEXT,
    run_at             REAL NOT NULL,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL,
    attempted_at       REAL,
    finished_at        REAL,
    lease_expires_at   REAL,
    heartbeat_at       REAL,
    last_error_code    TEXT,
    last_error         TEXT,
    result             TEXT,
    retry_policy       TEXT NOT NULL DEFAULT '{}',
    cancel_requested   INTEGER NOT NULL DEFAULT 0,
    created_by         TEXT,
    idempotency_key    TEXT,
    CONSTRAINT durq_jobs_state_check CHECK (
        state IN ('queued', 'running', 'retry_wait', 'succeeded', 'dead_letter', 'cancelled')),
    CONSTRAINT durq_jobs_attempts_check CHECK (max_attempts >= 1 AND attempt >= 0)
);

CREATE INDEX durq_jobs_ready_idx ON durq_jobs (queue, priority, run_at, id)
    WHERE state IN ('queued', 'retry_wait');
CREATE INDEX durq_jobs_lease_idx ON durq_jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX durq_jobs_state_created_idx ON durq_jobs (state, created_at);
CREATE INDEX durq_jobs_created_idx ON durq_jobs (created_at, id);

CREATE TABLE durq_attempts (
    job_id         INTEGER NOT NULL REFERENCES durq_jobs (id) ON DELETE CASCADE,
    attempt        INTEGER NOT NULL,
    claim_version  INTEGER NOT NULL,
    worker_id      TEXT,
    started_at     REAL,
    finished_at    REAL NOT NULL,
    runtime_ms     INTEGER,
    outcome        TEXT NOT NULL,
    error_code     TEXT,
    error_message  TEXT,
    PRIMARY KEY (job_id, claim_version)
);

CREATE TABLE durq_artifacts (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id         INTEGER NOT NULL REFERENCES durq_jobs (id) ON DELETE CASCADE,
    artifact_type  TEXT NOT NULL,
    ref            TEXT,
    payload        TEXT,
    created_at     REAL NOT NULL
);
CREATE INDEX durq_artifacts_job_idx ON durq_artifacts (job_id);

CREATE TABLE durq_idempotency (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    job_id       INTEGER NOT NULL,
    created_at   REAL NOT NULL,
    expires_at   REAL NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX durq_idempotency_expires_idx ON durq_idempotency (expires_at);

CREATE TABLE durq_tombstones (
    job_id     INTEGER PRIMARY KEY,
    pruned_at  REAL NOT NULL
);

CREATE TABLE durq_queues (
    name        TEXT PRIMARY KEY,
    paused      INTEGER NOT NULL DEFAULT 0,
    updated_at  REAL NOT NULL
);

CREATE TABLE durq_workers (
    id            TEXT PRIMARY KEY,
    hostname      TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    queues        TEXT NOT NULL DEFAULT '[]',
    concurrency   INTEGER NOT NULL,
    started_at    REAL NOT NULL,
    heartbeat_at  REAL NOT NULL,
    stopped_at    REAL
);

CREATE TABLE durq_leaders (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  REAL NOT NULL
);

CREATE TABLE durq_api_keys (
    id            TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    role          TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    created_at    REAL NOT NULL,
    last_used_at  REAL,
    disabled_at   REAL
);
