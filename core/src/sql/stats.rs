//! Queue depth by status, as `seatq stats` and the worker's `/metrics`
//! read it.

/// Requests by status.
pub const REQUESTS_BY_STATUS: &str =
    "SELECT status::text, count(*) FROM seatq.requests GROUP BY status ORDER BY status";
