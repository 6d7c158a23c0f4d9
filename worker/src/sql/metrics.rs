//! What `/metrics` and `/healthz` read: cheap, bounded statements that
//! never block a scrape or load the server.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use super::{Effect, Rows};

/// The queue as `/metrics` reports it on every scrape, cheap however many
/// finished requests the table holds (only the partial index
/// `requests_ready` is read): queued requests due now, queued requests
/// scheduled for later, and the age in seconds of the oldest due one.
pub const QUEUED_NOW: &str = "
SELECT count(*) FILTER (WHERE run_at <= now()) AS due,
       count(*) FILTER (WHERE run_at > now()) AS scheduled,
       coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now())), 0)::float8 AS oldest_due_secs
FROM seatq.requests WHERE status = 'queued'";

/// The parameters of [`QUEUED_NOW`]: none.
#[derive(Debug, Clone, Copy)]
pub struct QueuedNow;

impl QueuedNow {
    pub fn query(&self) -> Rows<'static, Queued> {
        sqlx::query_as(QUEUED_NOW)
    }
}

/// The row of [`QUEUED_NOW`].
#[derive(Debug, sqlx::FromRow)]
pub struct Queued {
    /// Queued requests due now,
    pub due: i64,
    /// queued requests scheduled for later,
    pub scheduled: i64,
    /// and the age of the oldest due one (0 without one).
    pub oldest_due_secs: f64,
}

/// Bound the statements of the current transaction in time
/// ([`SetLocalStatementTimeout`]; for metrics, which must never block a
/// scrape or load the server).
pub const SET_LOCAL_STATEMENT_TIMEOUT: &str = "SELECT set_config('statement_timeout', $1::text, true)";

/// The parameters of [`SET_LOCAL_STATEMENT_TIMEOUT`].
#[derive(Debug, Clone, Copy)]
pub struct SetLocalStatementTimeout<'a> {
    /// The timeout as the setting reads it: milliseconds, as text.
    pub millis: &'a str,
}

impl<'a> SetLocalStatementTimeout<'a> {
    pub fn query(&self) -> Effect<'a> {
        sqlx::query(SET_LOCAL_STATEMENT_TIMEOUT).bind(self.millis)
    }
}

/// The health check's query.
pub const PING: &str = "SELECT 1";

/// The parameters of [`PING`]: none.
#[derive(Debug, Clone, Copy)]
pub struct Ping;

impl Ping {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(PING)
    }
}
