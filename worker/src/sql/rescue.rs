//! Rescue: each worker process holds its life lock while it runs, and waits
//! for the life lock of the worker before it in the ring of registered
//! workers (see [`crate::rescue`]).

/// Take this process's life lock (`seatq.worker_lock`, host $1, pid $2) for
/// the session, if no other session holds it; whether this one now does.
pub const HOLD_LIFE_LOCK: &str = "SELECT pg_try_advisory_lock(seatq.worker_lock($1, $2))";

/// The life-lock keys of the registered workers other than this one (host
/// $1, pid $2), in ring order: the one before it in key order first, then
/// on round the ring, so that every worker of a fleet is watched by one.
pub const RING: &str = "
WITH me AS (SELECT seatq.worker_lock($1, $2) AS key),
     ring AS (SELECT DISTINCT seatq.worker_lock(host, pid) AS key FROM seatq.workers)
SELECT ring.key FROM ring, me
WHERE ring.key <> me.key
ORDER BY ring.key < me.key DESC, ring.key DESC";

/// Whether life lock $1 is free (its worker has ended, or never took it):
/// taken and given back at once if so.
pub const LIFE_LOCK_FREE: &str = "SELECT pg_try_advisory_lock($1) AND pg_advisory_unlock($1)";

/// Wait for life lock $1, then give it back at once: returns the moment the
/// session holding it ends (or when the session's `lock_timeout` runs out,
/// with 55P03).
pub const AWAIT_LIFE_LOCK: &str = "SELECT pg_advisory_lock($1), pg_advisory_unlock($1)";

/// How long the waiting session waits in one go ($1, e.g. `10s`): after it,
/// the ring is read again.
pub const SET_LOCK_TIMEOUT: &str = "SELECT set_config('lock_timeout', $1, false)";

/// Tell the other workers that the ring changed (this process holds its life
/// lock, or has registered): they read it again at once. The channel is
/// `seatq_core::sql::notify::WORKERS_CHANNEL`.
pub const ANNOUNCE: &str = "SELECT pg_notify('seatq_workers', '')";

/// The waiting session's server process, for [`CANCEL_WAIT`].
pub const BACKEND_PID: &str = "SELECT pg_backend_pid()";

/// End the wait of the waiting session (server process $1, a session of
/// this worker's own login) with 57014, so that it reads the ring again.
pub const CANCEL_WAIT: &str = "SELECT pg_cancel_backend($1)";
