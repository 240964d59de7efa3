-- durq schema 0003: what the HTTP service reads often.
-- Viewer and producer keys list only their owner's jobs, newest first.
CREATE INDEX durq_jobs_created_by_idx ON durq_jobs (created_by, id) WHERE created_by IS NOT NULL;
