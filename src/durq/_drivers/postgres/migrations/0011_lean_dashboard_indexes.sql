-- durq schema 0011: the dashboard's indexes cost the worker less.
-- * The live counts read the ready, limited and lease indexes the worker keeps anyway. The
--   index on (queue, state) of 0009 is dropped: every enqueue and every claim wrote a
--   duplicate key into it, and a drain ran at half its rate.
-- * The rollup finds recent attempts through a BRIN index on their finish time: attempts
--   are appended in about the order they finish, so a block range summary finds them, and
--   an insert writes nothing to it (a B-tree cost every finish one more index entry).
DROP INDEX IF EXISTS durq_jobs_live_idx;
DROP INDEX IF EXISTS durq_attempts_finished_idx;
CREATE INDEX durq_attempts_finished_brin ON durq_attempts USING brin (finished_at)
    WITH (autosummarize = on);
