-- durq schema 0012: a successful attempt is stored on its job row, not in durq_attempts.
-- The row holds the attempt's facts already (worker_id, attempted_at, finished_at, attempt,
-- claim_version); runtime_ms, the runtime of the job's latest finished attempt, was the one
-- missing. Every read of attempts returns a succeeded job's attempt as a record of its own;
-- a stored record (written before this migration, with a run report, or at a requeue) wins.
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE durq_jobs ADD COLUMN runtime_ms INTEGER;
