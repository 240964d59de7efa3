-- durq schema 0004 (PostgreSQL): fewer writes per job on the claim and finish path.
--
-- Every claim and every finish changes `state`, so PostgreSQL writes a new entry in every
-- index on durq_jobs for each of them. These two served only listings that the primary key
-- (newest first), the partial ready, lease and finished indexes already answer.
DROP INDEX IF EXISTS durq_jobs_state_created_idx;
DROP INDEX IF EXISTS durq_jobs_created_idx;
-- An attempt record is written only by the statement that finishes its job, in the same
-- statement, so the foreign key proved nothing new; its per-row check cost the finish a
-- quarter of its time. Pruning deletes a job's attempts with the job (job_delete_many).
ALTER TABLE durq_attempts DROP CONSTRAINT IF EXISTS durq_attempts_job_id_fkey;
-- The reclaimer's index, keyed on the lease itself. As a partial index on state = 'running'
-- the planner also picked it for the worker's fenced writes (which name that state), and
-- walked every claim's dead entry in it since the last vacuum: a finish of 100 jobs took
-- 10 ms instead of 2 ms. Those writes now go by primary key. Only running jobs hold a lease.
DROP INDEX IF EXISTS durq_jobs_lease_idx;
CREATE INDEX durq_jobs_lease_idx ON durq_jobs (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;
