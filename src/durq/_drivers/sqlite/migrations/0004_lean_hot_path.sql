-- durq schema 0004 (SQLite): fewer writes per job on the claim and finish path.
--
-- Each cost a write on every enqueue, and the first (it holds `state`) on every claim and
-- finish too. They served only listings that the primary key (newest first) and the
-- partial ready, lease and finished indexes already answer.
DROP INDEX IF EXISTS durq_jobs_state_created_idx;
DROP INDEX IF EXISTS durq_jobs_created_idx;
