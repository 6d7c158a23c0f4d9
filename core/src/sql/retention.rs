//! Retention of finished requests: the worker prunes them in the
//! background, `seatq prune` on demand.

/// Delete up to $2 succeeded or failed requests that finished more than $1
/// seconds ago, oldest first; returns how many. Dead requests are kept: an
/// operator may still retry them. Through `seatq.prune_finished`
/// (migrations/0001_queue.sql), which the worker role may execute though it
/// may not delete requests itself.
pub const PRUNE_FINISHED: &str = "SELECT seatq.prune_finished($1, $2)";
