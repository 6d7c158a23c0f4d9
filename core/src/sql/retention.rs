//! Retention of finished requests: the worker prunes them in the
//! background, `seatq prune` on demand.
//!
//! Each statement's params struct is beside it (see [`crate::sql`]).

use super::Scalars;

/// Delete up to $2 succeeded or failed requests that finished more than $1
/// seconds ago ([`PruneFinished`]), oldest first; returns how many. Dead
/// requests are kept: an operator may still retry them. Through
/// `seatq.prune_finished` (migrations/0001_queue.sql), which the worker role
/// may execute though it may not delete requests itself.
pub const PRUNE_FINISHED: &str = "SELECT seatq.prune_finished($1, $2)";

/// The parameters of [`PRUNE_FINISHED`].
#[derive(Debug, Clone, Copy)]
pub struct PruneFinished {
    /// Only requests finished more than this many seconds ago,
    pub older_than_secs: f64,
    /// and at most this many of them.
    pub limit: i64,
}

impl PruneFinished {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(PRUNE_FINISHED).bind(self.older_than_secs).bind(self.limit)
    }
}
