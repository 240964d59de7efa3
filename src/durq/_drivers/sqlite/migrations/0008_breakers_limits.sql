-- durq schema 0005 (SQLite): circuit breakers, per-key limits, alerts, run logs and
-- the sustained backlog guardrail. Numbered alike in both dialects.

-- A job may name a breaker key and a concurrency key; most jobs name neither (NULL).
ALTER TABLE durq_jobs ADD COLUMN breaker_key TEXT;
ALTER TABLE durq_jobs ADD COLUMN concurrency_key TEXT;

-- The ready index now holds only jobs without a concurrency key, so the plain claim never
-- walks over jobs that wait for their key's budget; limited jobs have an index of their own,
-- read one key at a time by the claim.
DROP INDEX IF EXISTS durq_jobs_ready_idx;
CREATE INDEX durq_jobs_ready_idx ON durq_jobs (queue, priority, run_at, id)
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NULL;
CREATE INDEX durq_jobs_limited_idx ON durq_jobs (queue, concurrency_key, priority, run_at, id)
    WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL;
-- Opening and closing a breaker moves the run_at of that key's waiting jobs.
CREATE INDEX durq_jobs_breaker_idx ON durq_jobs (breaker_key)
    WHERE breaker_key IS NOT NULL AND state IN ('queued', 'retry_wait');

-- One row per breaker key. threshold and pause_seconds are the rule in force for the key
-- (set at enqueue from the app's configuration). While open, the key's waiting jobs are
-- parked: one (the half-open probe) until paused_until, the others until held_until.
CREATE TABLE durq_breakers (
    key                   TEXT PRIMARY KEY,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    last_failure_at       REAL,
    paused_until          REAL,
    held_until            REAL,
    opened_count          INTEGER NOT NULL DEFAULT 0,
    threshold             INTEGER NOT NULL DEFAULT 5,
    pause_seconds         REAL NOT NULL DEFAULT 1800,
    updated_at            REAL NOT NULL
);

-- One row per concurrency key: the limits in force and what is spent of them. `running`
-- counts claimed jobs not yet finished; `window_count` the starts in the rate window that
-- begins at `window_start` (seconds since the epoch, aligned to the window).
CREATE TABLE durq_limits (
    key            TEXT PRIMARY KEY,
    concurrency    INTEGER,
    rate           INTEGER,
    rate_window    REAL NOT NULL DEFAULT 1,
    running        INTEGER NOT NULL DEFAULT 0,
    window_start   REAL NOT NULL DEFAULT 0,
    window_count   INTEGER NOT NULL DEFAULT 0,
    claimed_at     REAL,
    CONSTRAINT durq_limits_check CHECK (running >= 0 AND window_count >= 0)
);

CREATE TABLE durq_alerts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    category     TEXT NOT NULL,
    severity     TEXT NOT NULL,
    key          TEXT NOT NULL,
    context      TEXT NOT NULL DEFAULT '{}',
    first_seen   REAL NOT NULL,
    last_seen    REAL NOT NULL,
    count        INTEGER NOT NULL DEFAULT 1,
    resolved_at  REAL,
    acked_at     REAL
);
-- At most one open alert per (category, key): raising it again counts it.
CREATE UNIQUE INDEX durq_alerts_open_idx ON durq_alerts (category, key) WHERE resolved_at IS NULL;

-- Run logs: what the task reported about its attempt.
ALTER TABLE durq_attempts ADD COLUMN processed INTEGER;
ALTER TABLE durq_attempts ADD COLUMN failed INTEGER;
ALTER TABLE durq_attempts ADD COLUMN summary TEXT;

-- Since when the queue has been over a backlog guardrail (NULL: it is not).
ALTER TABLE durq_queues ADD COLUMN degraded_since REAL;
