-- durq schema 0009 (PostgreSQL): the dashboard's history. Numbered alike in both dialects.

-- Maintenance rolls attempts up by the minute they finished in, reading only the newest ones.
CREATE INDEX durq_attempts_finished_idx ON durq_attempts (finished_at);

-- One row per (minute, queue): attempts finished in that minute by outcome, and the pickup
-- latency (due time to claim) of those jobs. The overview's charts read only this table, so
-- they cost the same with a thousand retained jobs or a million.
CREATE TABLE durq_stats_minutes (
    minute         BIGINT NOT NULL,
    queue          TEXT NOT NULL,
    succeeded      INTEGER NOT NULL DEFAULT 0,
    failed         INTEGER NOT NULL DEFAULT 0,
    dead_letter    INTEGER NOT NULL DEFAULT 0,
    pickup_p50_ms  INTEGER,
    pickup_p95_ms  INTEGER,
    PRIMARY KEY (minute, queue)
);

-- The dead-letter page groups by task and error code without reading other states.
CREATE INDEX durq_jobs_dead_letter_idx ON durq_jobs (task, last_error_code)
    WHERE state = 'dead_letter';

-- The overview counts waiting and running jobs per queue from this small index alone;
-- finished jobs are not in it, however many are retained.
CREATE INDEX durq_jobs_live_idx ON durq_jobs (queue, state)
    WHERE state IN ('queued', 'retry_wait', 'running');
