//! Queue depth, as `seatq stats` and the worker's `/metrics` read it.

/// Requests by status.
pub const REQUESTS_BY_STATUS: &str =
    "SELECT status::text, count(*) FROM seatq.requests GROUP BY status ORDER BY status";

/// The queue as `/metrics` reports it on every scrape, cheap however many
/// finished requests the table holds (only the partial index
/// `requests_ready` is read): queued requests due now, queued requests
/// scheduled for later, and the age in seconds of the oldest due one.
pub const QUEUED_NOW: &str = "
SELECT count(*) FILTER (WHERE run_at <= now()) AS due,
       count(*) FILTER (WHERE run_at > now()) AS scheduled,
       coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now())), 0)::float8 AS oldest_due_secs
FROM seatq.requests WHERE status = 'queued'";

/// Bound the statements of the current transaction to $1 milliseconds (for
/// metrics, which must never block a scrape or load the server).
pub const SET_LOCAL_STATEMENT_TIMEOUT: &str = "SELECT set_config('statement_timeout', $1::text, true)";

/// Age in seconds of the oldest request that is due and still queued.
pub const OLDEST_QUEUED_AGE: &str = "
SELECT extract(epoch FROM now() - min(run_at))::float8
FROM seatq.requests WHERE status = 'queued' AND run_at <= now()";

/// The health check's query.
pub const PING: &str = "SELECT 1";
