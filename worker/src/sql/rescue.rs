//! Rescue: each worker process holds its life lock while it runs, and waits
//! for the life lock of the worker before it in the ring of registered
//! workers (see [`crate::rescue`]).
//!
//! Each statement's params struct is beside it (see [`crate::sql`]).

use super::{Effect, Scalars};

/// Take this process's life lock (`seatq.worker_lock` of [`HoldLifeLock`])
/// for the session, if no other session holds it; whether this one now does.
pub const HOLD_LIFE_LOCK: &str = "SELECT pg_try_advisory_lock(seatq.worker_lock($1, $2))";

/// The parameters of [`HOLD_LIFE_LOCK`]: this process.
#[derive(Debug, Clone, Copy)]
pub struct HoldLifeLock<'a> {
    pub host: &'a str,
    pub pid: i32,
}

impl<'a> HoldLifeLock<'a> {
    pub fn query(&self) -> Scalars<'a, bool> {
        sqlx::query_scalar(HOLD_LIFE_LOCK).bind(self.host).bind(self.pid)
    }
}

/// The life-lock keys of the registered workers other than this one
/// ([`Ring`]), in ring order: the one before it in key order first, then
/// on round the ring, so that every worker of a fleet is watched by one.
pub const RING: &str = "
WITH me AS (SELECT seatq.worker_lock($1, $2) AS key),
     ring AS (SELECT DISTINCT seatq.worker_lock(host, pid) AS key FROM seatq.workers)
SELECT ring.key FROM ring, me
WHERE ring.key <> me.key
ORDER BY ring.key < me.key DESC, ring.key DESC";

/// The parameters of [`RING`]: this process.
#[derive(Debug, Clone, Copy)]
pub struct Ring<'a> {
    pub host: &'a str,
    pub pid: i32,
}

impl<'a> Ring<'a> {
    pub fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(RING).bind(self.host).bind(self.pid)
    }
}

/// Whether a life lock ([`LifeLockFree`]) is free (its worker has ended, or
/// never took it): taken and given back at once if so.
pub const LIFE_LOCK_FREE: &str = "SELECT pg_try_advisory_lock($1) AND pg_advisory_unlock($1)";

/// The parameters of [`LIFE_LOCK_FREE`].
#[derive(Debug, Clone, Copy)]
pub struct LifeLockFree {
    /// The life lock's key, as [`RING`] gives it.
    pub key: i64,
}

impl LifeLockFree {
    pub fn query(&self) -> Scalars<'static, bool> {
        sqlx::query_scalar(LIFE_LOCK_FREE).bind(self.key)
    }
}

/// Wait for a life lock ([`AwaitLifeLock`]), then give it back at once:
/// returns the moment the session holding it ends (or when the session's
/// `lock_timeout` runs out, with 55P03).
pub const AWAIT_LIFE_LOCK: &str = "SELECT pg_advisory_lock($1), pg_advisory_unlock($1)";

/// The parameters of [`AWAIT_LIFE_LOCK`].
#[derive(Debug, Clone, Copy)]
pub struct AwaitLifeLock {
    /// The life lock's key, as [`RING`] gives it.
    pub key: i64,
}

impl AwaitLifeLock {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(AWAIT_LIFE_LOCK).bind(self.key)
    }
}

/// How long the waiting session waits in one go ([`SetLockTimeout`]): after
/// it, the ring is read again.
pub const SET_LOCK_TIMEOUT: &str = "SELECT set_config('lock_timeout', $1, false)";

/// The parameters of [`SET_LOCK_TIMEOUT`].
#[derive(Debug, Clone, Copy)]
pub struct SetLockTimeout<'a> {
    /// The timeout as the setting reads it, e.g. `10s` or `10000ms`.
    pub timeout: &'a str,
}

impl<'a> SetLockTimeout<'a> {
    pub fn query(&self) -> Effect<'a> {
        sqlx::query(SET_LOCK_TIMEOUT).bind(self.timeout)
    }
}

/// Tell the other workers that the ring changed (this process holds its life
/// lock, or has registered): they read it again at once. The channel is
/// `seatq_core::sql::notify::WORKERS_CHANNEL`.
pub const ANNOUNCE: &str = "SELECT pg_notify('seatq_workers', '')";

/// The parameters of [`ANNOUNCE`]: none.
#[derive(Debug, Clone, Copy)]
pub struct Announce;

impl Announce {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(ANNOUNCE)
    }
}

/// The waiting session's server process, for [`CANCEL_WAIT`].
pub const BACKEND_PID: &str = "SELECT pg_backend_pid()";

/// The parameters of [`BACKEND_PID`]: none.
#[derive(Debug, Clone, Copy)]
pub struct BackendPid;

impl BackendPid {
    pub fn query(&self) -> Scalars<'static, i32> {
        sqlx::query_scalar(BACKEND_PID)
    }
}

/// End the wait of the waiting session ([`CancelWait`]) with 57014, so that
/// it reads the ring again.
pub const CANCEL_WAIT: &str = "SELECT pg_cancel_backend($1)";

/// The parameters of [`CANCEL_WAIT`].
#[derive(Debug, Clone, Copy)]
pub struct CancelWait {
    /// The waiting session's server process ([`BACKEND_PID`]), a session of
    /// this worker's own login.
    pub pid: i32,
}

impl CancelWait {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(CANCEL_WAIT).bind(self.pid)
    }
}
