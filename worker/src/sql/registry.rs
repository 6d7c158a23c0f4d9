//! The worker registry, `seatq.workers`: registration and heartbeats.
//!
//! Each statement's params struct is beside it (see [`crate::sql`]).

use serde_json::Value;

use super::{Effect, Scalars};

/// Register a worker process ([`RegisterWorker`]); returns its id.
pub const REGISTER_WORKER: &str = "
INSERT INTO seatq.workers (name, host, pid, settings) VALUES ($1, $2, $3, $4) RETURNING id";

/// The parameters of [`REGISTER_WORKER`].
#[derive(Debug, Clone, Copy)]
pub struct RegisterWorker<'a> {
    pub name: &'a str,
    pub host: &'a str,
    /// Its process id on `host`.
    pub pid: i32,
    /// The settings it runs with, for `seatq workers`.
    pub settings: &'a Value,
}

impl<'a> RegisterWorker<'a> {
    pub fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(REGISTER_WORKER).bind(self.name).bind(self.host).bind(self.pid).bind(self.settings)
    }
}

/// Heartbeat ([`Heartbeat`]); returns no row if the row is gone (another
/// worker judged this one dead), so the caller registers again.
pub const HEARTBEAT: &str = "UPDATE seatq.workers SET heartbeat_at = now() WHERE id = $1 RETURNING true";

/// The parameters of [`HEARTBEAT`].
#[derive(Debug, Clone, Copy)]
pub struct Heartbeat {
    /// This worker's id, as registered.
    pub worker: i64,
}

impl Heartbeat {
    pub fn query(&self) -> Scalars<'static, bool> {
        sqlx::query_scalar(HEARTBEAT).bind(self.worker)
    }
}

/// Drop workers whose heartbeat is too old ([`DropDeadWorkers`]).
pub const DROP_DEAD_WORKERS: &str =
    "DELETE FROM seatq.workers WHERE heartbeat_at < now() - $1::float8 * interval '1 second'";

/// The parameters of [`DROP_DEAD_WORKERS`].
#[derive(Debug, Clone, Copy)]
pub struct DropDeadWorkers {
    /// A worker whose last heartbeat is older than this is dead.
    pub after_secs: f64,
}

impl DropDeadWorkers {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(DROP_DEAD_WORKERS).bind(self.after_secs)
    }
}

/// A worker leaving cleanly ([`DeregisterWorker`]).
pub const DEREGISTER_WORKER: &str = "DELETE FROM seatq.workers WHERE id = $1";

/// The parameters of [`DEREGISTER_WORKER`].
#[derive(Debug, Clone, Copy)]
pub struct DeregisterWorker {
    /// This worker's id, as registered.
    pub worker: i64,
}

impl DeregisterWorker {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(DEREGISTER_WORKER).bind(self.worker)
    }
}
