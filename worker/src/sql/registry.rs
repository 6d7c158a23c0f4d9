//! The worker registry, `seatq.workers`: registration and heartbeats.

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
