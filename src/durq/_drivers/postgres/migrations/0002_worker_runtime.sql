-- durq schema 0002 (PostgreSQL): what the worker runtime and maintenance need.

-- How often a worker promised to heartbeat: `durq workers` calls it dead after missing a few.
ALTER TABLE durq_workers ADD COLUMN heartbeat_seconds DOUBLE PRECISION NOT NULL DEFAULT 10;
-- Outcomes this worker has written since it started.
ALTER TABLE durq_workers ADD COLUMN processed BIGINT NOT NULL DEFAULT 0;

-- Pruning reads finished rows of one state, oldest first.
CREATE INDEX durq_jobs_finished_idx ON durq_jobs (state, finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX durq_tombstones_pruned_idx ON durq_tombstones (pruned_at);
