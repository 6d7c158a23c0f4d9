//! What `/metrics` and `/healthz` read: cheap, bounded statements that
//! never block a scrape or load the server.

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

/// The health check's query.
pub const PING: &str = "SELECT 1";
