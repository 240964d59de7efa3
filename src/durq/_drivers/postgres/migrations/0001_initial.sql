-- durq schema 0001 (PostgreSQL). Numbered alike in both dialects.

CREATE TABLE durq_jobs (
    id                 BIGSERIAL PRIMARY KEY,
    queue              TEXT NOT NULL,
    task               TEXT NOT NULL,
    args               JSONB NOT NULL DEFAULT '{}',
    state              TEXT NOT NULL DEFAULT 'queued',
    stage              TEXT,
    priority           INTEGER NOT NULL DEFAULT 0,
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL DEFAULT 20,
    claim_version      BIGINT NOT NULL DEFAULT 0,
    worker_id          TEXT,
    run_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempted_at       TIMESTAMPTZ,
    finished_at        TIMESTAMPTZ,
    lease_expires_at   TIMESTAMPTZ,
    heartbeat_at       TIMESTAMPTZ,
    last_error_code    TEXT,
    last_error         TEXT,
    result             JSONB,
    retry_policy       JSONB NOT NULL DEFAULT '{}',
    cancel_requested   BOOLEAN NOT NULL DEFAULT false,
    created_by         TEXT,
    idempotency_key    TEXT,
    CONSTRAINT durq_jobs_state_check CHECK (
        state IN ('queued', 'running', 'retry_wait', 'succeeded', 'dead_letter', 'cancelled')),
    CONSTRAINT durq_jobs_attempts_check CHECK (max_attempts >= 1 AND attempt >= 0)
);

-- The claim reads only this index: ready rows, however many finished rows the table holds.
CREATE INDEX durq_jobs_ready_idx ON durq_jobs (queue, priority, run_at, id)
    WHERE state IN ('queued', 'retry_wait');
-- The reclaimer reads only running rows.
CREATE INDEX durq_jobs_lease_idx ON durq_jobs (lease_expires_at) WHERE state = 'running';
-- Listing and pruning.
CREATE INDEX durq_jobs_state_created_idx ON durq_jobs (state, created_at);
CREATE INDEX durq_jobs_created_idx ON durq_jobs (created_at, id);

CREATE TABLE durq_attempts (
    job_id         BIGINT NOT NULL REFERENCES durq_jobs (id) ON DELETE CASCADE,
    attempt        INTEGER NOT NULL,
    claim_version  BIGINT NOT NULL,
    worker_id      TEXT,
    started_at     TIMESTAMPTZ,
    finished_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    runtime_ms     INTEGER,
    outcome        TEXT NOT NULL,
    error_code     TEXT,
    error_message  TEXT,
    PRIMARY KEY (job_id, claim_version)
);

CREATE TABLE durq_artifacts (
    id             BIGSERIAL PRIMARY KEY,
    job_id         BIGINT NOT NULL REFERENCES durq_jobs (id) ON DELETE CASCADE,
    artifact_type  TEXT NOT NULL,
    ref            TEXT,
    payload        JSONB,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX durq_artifacts_job_idx ON durq_artifacts (job_id);

CREATE TABLE durq_idempotency (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    job_id       BIGINT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX durq_idempotency_expires_idx ON durq_idempotency (expires_at);

-- Ids of pruned jobs, so a lookup can answer "gone" (410) rather than "not found".
CREATE TABLE durq_tombstones (
    job_id     BIGINT PRIMARY KEY,
    pruned_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE durq_queues (
    name        TEXT PRIMARY KEY,
    paused      BOOLEAN NOT NULL DEFAULT false,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE durq_workers (
    id            TEXT PRIMARY KEY,
    hostname      TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    queues        JSONB NOT NULL DEFAULT '[]',
    concurrency   INTEGER NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    stopped_at    TIMESTAMPTZ
);

-- One row per maintenance role; the holder renews its lease.
CREATE TABLE durq_leaders (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE durq_api_keys (
    id            TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    role          TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at  TIMESTAMPTZ,
    disabled_at   TIMESTAMPTZ
);
