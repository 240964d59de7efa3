-- The worker runtime, its registry and maintenance (SQLite). Time is :now (epoch seconds).

-- name: job_next_due
-- Seconds until the next scheduled job of these queues comes due (NULL: none waiting).
-- One subquery per ready index (jobs without and with a concurrency key).
SELECT min(
    (SELECT min(run_at) FROM durq_jobs
     WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NULL
       AND queue IN (SELECT value FROM json_each(:queues)) AND run_at > :now),
    COALESCE((SELECT min(run_at) FROM durq_jobs
     WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL
       AND queue IN (SELECT value FROM json_each(:queues)) AND run_at > :now), 1e18)
) - :now AS wait_s

-- name: worker_register
INSERT INTO durq_workers (id, hostname, pid, queues, concurrency, heartbeat_seconds,
                          started_at, heartbeat_at, stopped_at, processed)
VALUES (:id, :hostname, :pid, :queues, :concurrency, :heartbeat_seconds, :now, :now, NULL, 0)
ON CONFLICT (id) DO UPDATE
SET hostname = excluded.hostname, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, heartbeat_seconds = excluded.heartbeat_seconds,
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
    stopped_at = NULL, processed = 0

-- name: worker_heartbeat
UPDATE durq_workers SET heartbeat_at = :now, processed = :processed WHERE id = :id

-- name: worker_stop
UPDATE durq_workers SET heartbeat_at = :now, stopped_at = :now, processed = :processed
WHERE id = :id

-- name: worker_list
-- Alive: not stopped, and heard from within three heartbeats (plus a second of slack).
SELECT w.id, w.hostname, w.pid, w.queues, w.concurrency, w.heartbeat_seconds, w.processed,
       w.started_at, w.heartbeat_at, w.stopped_at,
       (w.stopped_at IS NULL AND w.heartbeat_at > :now - (3 * w.heartbeat_seconds + 1))
           AS alive,
       COALESCE(r.n, 0) AS running
FROM durq_workers w
LEFT JOIN (SELECT worker_id, count(*) AS n FROM durq_jobs
           WHERE state = 'running' GROUP BY worker_id) r ON r.worker_id = w.id
WHERE :include_stopped OR w.stopped_at IS NULL
ORDER BY w.started_at DESC, w.id
LIMIT :limit

-- name: worker_prune
DELETE FROM durq_workers WHERE heartbeat_at < :now - :older_than

-- name: leader_acquire
-- Take the role if it is free or expired, or renew it if we hold it. A row back: we lead.
INSERT INTO durq_leaders (name, holder, expires_at)
VALUES (:name, :holder, :now + :ttl)
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE durq_leaders.holder = excluded.holder OR durq_leaders.expires_at < :now
RETURNING holder

-- name: leader_get
SELECT name, holder, expires_at FROM durq_leaders WHERE name = :name AND expires_at >= :now

-- name: job_prune_ids
-- Finished jobs of one state past their retention, oldest first.
SELECT id FROM durq_jobs
WHERE state = :state AND finished_at IS NOT NULL AND finished_at < :now - :older_than
ORDER BY finished_at
LIMIT :limit

-- name: tombstone_insert_many
-- The owner goes with the id: only the owner's keys may learn that the job is gone.
INSERT INTO durq_tombstones (job_id, pruned_at, created_by)
SELECT id, :now, created_by FROM durq_jobs WHERE id IN (SELECT value FROM json_each(:ids))
ON CONFLICT (job_id) DO NOTHING

-- name: job_delete_many
-- Attempts and artifacts go with their job (ON DELETE CASCADE).
DELETE FROM durq_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: tombstone_prune
DELETE FROM durq_tombstones
WHERE job_id IN (SELECT job_id FROM durq_tombstones WHERE pruned_at < :now - :older_than
                 LIMIT :limit)

-- name: idem_prune
DELETE FROM durq_idempotency
WHERE rowid IN (SELECT rowid FROM durq_idempotency WHERE expires_at < :now LIMIT :limit)

-- name: attempts_busiest_second
-- How many attempts finished in the busiest wall-clock second (the demo's throughput),
-- successes stored on their job row included.
SELECT count(*) AS n
FROM (SELECT finished_at FROM durq_attempts
      UNION ALL
      SELECT j.finished_at FROM durq_jobs j WHERE {success_on_row}) a
GROUP BY CAST(finished_at AS INTEGER)
ORDER BY n DESC
LIMIT 1
