-- durq schema 0011: the dashboard's live counts read the ready, limited and lease indexes
-- the worker keeps anyway. The index on (queue, state) of 0009 is dropped: every enqueue and
-- every claim wrote a duplicate key into it, and a drain ran at half its rate.
DROP INDEX IF EXISTS durq_jobs_live_idx;
