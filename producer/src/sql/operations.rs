//! Operations: the worker registry, dead-request retry, retention, metrics.

/// Register a worker process; returns its id.
pub const REGISTER_WORKER: &str = "
INSERT INTO seatq.workers (name, host, pid, settings) VALUES ($1, $2, $3, $4) RETURNING id";

/// Heartbeat; returns false if the row is gone (another worker judged this
/// one dead), so the caller registers again.
pub const HEARTBEAT: &str = "UPDATE seatq.workers SET heartbeat_at = now() WHERE id = $1 RETURNING true";

/// Drop workers whose heartbeat is older than $1 seconds.
pub const DROP_DEAD_WORKERS: &str =
    "DELETE FROM seatq.workers WHERE heartbeat_at < now() - $1::float8 * interval '1 second'";

/// A worker leaving cleanly.
pub const DEREGISTER_WORKER: &str = "DELETE FROM seatq.workers WHERE id = $1";

/// Live workers: heartbeat within $1 seconds.
pub const LIVE_WORKERS: &str = "
SELECT id, name, host, pid, started_at, heartbeat_at, settings,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_secs
FROM seatq.workers
WHERE heartbeat_at >= now() - $1::float8 * interval '1 second'
ORDER BY started_at, id";

/// Put dead requests back in the queue: request $1, or all dead with $2.
/// Attempts start again from zero; the last error stays until the next outcome.
pub const RETRY_DEAD: &str = "
UPDATE seatq.requests
SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL
WHERE status = 'dead' AND (id = $1 OR $2)
RETURNING id";

/// Delete up to $2 succeeded or failed requests that finished more than $1
/// seconds ago. Dead requests are kept: an operator may still retry them.
/// (`status <> 'queued'` lets the partial index `requests_finished` serve it.)
pub const PRUNE_FINISHED: &str = "
WITH old AS (
    SELECT id FROM seatq.requests
    WHERE status <> 'queued' AND status <> 'dead'
      AND finished_at < now() - $1::float8 * interval '1 second'
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM seatq.requests r USING old WHERE r.id = old.id";
