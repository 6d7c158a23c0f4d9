//! Operations: live workers, dead-request retry.

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
