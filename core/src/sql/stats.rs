//! Queue depth by status, as `seatq stats` and the worker's `/metrics`
//! read it.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use super::Rows;

/// Requests by status ([`RequestsByStatus`]), one [`StatusCount`] a status.
pub const REQUESTS_BY_STATUS: &str =
    "SELECT status::text, count(*) FROM seatq.requests GROUP BY status ORDER BY status";

/// The parameters of [`REQUESTS_BY_STATUS`]: none.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestsByStatus;

impl RequestsByStatus {
    pub fn query(&self) -> Rows<'static, StatusCount> {
        sqlx::query_as(REQUESTS_BY_STATUS)
    }
}

/// A row of [`REQUESTS_BY_STATUS`].
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StatusCount {
    /// `queued`, `succeeded`, `failed` or `dead`.
    pub status: String,
    /// How many requests are in it.
    pub count: i64,
}
