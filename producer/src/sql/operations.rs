//! Operations: live workers, dead requests and their retry.

use super::queue::request_columns;

/// Live workers: heartbeat within $1 seconds.
pub const LIVE_WORKERS: &str = "
SELECT id, name, host, pid, started_at, heartbeat_at, settings,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_secs
FROM seatq.workers
WHERE heartbeat_at >= now() - $1::float8 * interval '1 second'
ORDER BY started_at, id";

/// The latest $1 dead requests, with their last error.
pub const DEAD_REQUESTS: &str = concat!(
    "SELECT ",
    request_columns!(),
    " FROM seatq.requests WHERE status = 'dead' ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT $1"
);

/// Put dead requests back in the queue: request $1, or all dead with $2.
/// Attempts start again from zero; the last error stays until the next outcome.
pub const RETRY_DEAD: &str = "
UPDATE seatq.requests
SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL
WHERE status = 'dead' AND (id = $1 OR $2)
RETURNING id";
