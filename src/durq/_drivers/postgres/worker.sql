-- The worker runtime, its registry and maintenance (PostgreSQL). Time is now().

-- name: job_next_due
-- Seconds until the next scheduled job of these queues comes due (NULL: none waiting).
-- One subquery per ready index (jobs without and with a concurrency key).
SELECT EXTRACT(EPOCH FROM LEAST(
    (SELECT min(run_at) FROM durq_jobs
     WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NULL
       AND queue = ANY(CAST(:queues AS text[])) AND run_at > now()),
    (SELECT min(run_at) FROM durq_jobs
     WHERE state IN ('queued', 'retry_wait') AND concurrency_key IS NOT NULL
       AND queue = ANY(CAST(:queues AS text[])) AND run_at > now())) - now()) AS wait_s

-- name: listen_jobs
LISTEN durq_jobs

-- name: worker_register
INSERT INTO durq_workers (id, hostname, pid, queues, concurrency, heartbeat_seconds,
                          started_at, heartbeat_at, stopped_at, processed)
VALUES (:id, :hostname, :pid, CAST(:queues AS jsonb), :concurrency, :heartbeat_seconds,
        now(), now(), NULL, 0)
ON CONFLICT (id) DO UPDATE
SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
    concurrency = EXCLUDED.concurrency, heartbeat_seconds = EXCLUDED.heartbeat_seconds,
    started_at = now(), heartbeat_at = now(), stopped_at = NULL, processed = 0

-- name: worker_heartbeat
UPDATE durq_workers SET heartbeat_at = now(), processed = :processed WHERE id = :id

-- name: worker_stop
UPDATE durq_workers SET heartbeat_at = now(), stopped_at = now(), processed = :processed
WHERE id = :id

-- name: worker_list
-- Alive: not stopped, and heard from within three heartbeats (plus a second of slack).
SELECT w.id, w.hostname, w.pid, CAST(w.queues AS text) AS queues, w.concurrency,
       w.heartbeat_seconds, w.processed, w.started_at, w.heartbeat_at, w.stopped_at,
       (w.stopped_at IS NULL AND w.heartbeat_at > now()
            - make_interval(secs => 3 * w.heartbeat_seconds + 1)) AS alive,
       COALESCE(r.n, 0) AS running
FROM durq_workers w
LEFT JOIN (SELECT worker_id, count(*) AS n FROM durq_jobs
           WHERE state = 'running' GROUP BY worker_id) r ON r.worker_id = w.id
WHERE CAST(:include_stopped AS boolean) OR w.stopped_at IS NULL
ORDER BY w.started_at DESC, w.id
LIMIT :limit

-- name: worker_prune
-- Forget workers not heard from for a long time (their jobs were reclaimed long ago).
DELETE FROM durq_workers
WHERE heartbeat_at < now() - make_interval(secs => CAST(:older_than AS float8))

-- name: leader_acquire
-- Take the role if it is free or expired, or renew it if we hold it. A row back: we lead.
INSERT INTO durq_leaders (name, holder, expires_at)
VALUES (:name, :holder, now() + make_interval(secs => CAST(:ttl AS float8)))
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE durq_leaders.holder = EXCLUDED.holder OR durq_leaders.expires_at < now()
RETURNING holder

-- name: leader_get
SELECT name, holder, expires_at FROM durq_leaders WHERE name = :name AND expires_at >= now()

-- name: job_prune_ids
-- Finished jobs of one state past their retention, oldest first; locked so that two
-- pruners never take the same rows.
SELECT id FROM durq_jobs
WHERE state = :state AND finished_at IS NOT NULL
  AND finished_at < now() - make_interval(secs => CAST(:older_than AS float8))
ORDER BY finished_at
LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: tombstone_insert_many
-- The owner goes with the id: only the owner's keys may learn that the job is gone.
INSERT INTO durq_tombstones (job_id, created_by)
SELECT id, created_by FROM durq_jobs WHERE id = ANY(CAST(:ids AS bigint[]))
ON CONFLICT (job_id) DO NOTHING

-- name: job_delete_many
-- Attempts go with their job here (they have no foreign key, see migration 0004);
-- artifacts by ON DELETE CASCADE.
WITH attempts AS (
    DELETE FROM durq_attempts WHERE job_id = ANY(CAST(:ids AS bigint[]))
)
DELETE FROM durq_jobs WHERE id = ANY(CAST(:ids AS bigint[]))

-- name: tombstone_prune
DELETE FROM durq_tombstones
WHERE job_id IN (SELECT job_id FROM durq_tombstones
                 WHERE pruned_at < now() - make_interval(secs => CAST(:older_than AS float8))
                 LIMIT :limit)

-- name: idem_prune
DELETE FROM durq_idempotency
WHERE (scope, key) IN (SELECT scope, key FROM durq_idempotency
                       WHERE expires_at < now() LIMIT :limit)

-- name: attempts_busiest_second
-- How many attempts finished in the busiest wall-clock second (the demo's throughput),
-- successes stored on their job row included.
SELECT count(*) AS n
FROM (SELECT finished_at FROM durq_attempts
      UNION ALL
      SELECT j.finished_at FROM durq_jobs j WHERE {success_on_row}) a
GROUP BY date_trunc('second', finished_at)
ORDER BY n DESC
LIMIT 1
