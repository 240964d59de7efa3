-- The owner (created_by) of a pruned job, kept in its tombstone, so that only the owner's
-- keys learn the job is gone (410) and every other tenant gets the same 404 as for an id
-- that never existed. Tombstones written before this migration have no owner (NULL).
ALTER TABLE durq_tombstones ADD COLUMN created_by TEXT;
