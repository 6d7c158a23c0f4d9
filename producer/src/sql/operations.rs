//! Operations: live workers, dead requests and their retry.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::queue::request_columns;
use super::{Rows, Scalars};
use crate::outcome::RequestRecord;

/// Live workers ([`LiveWorkers`]): heartbeat within $1 seconds.
pub(crate) const LIVE_WORKERS: &str = "
SELECT id, name, host, pid, started_at, heartbeat_at, settings,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_secs
FROM seatq.workers
WHERE heartbeat_at >= now() - $1::float8 * interval '1 second'
ORDER BY started_at, id";

/// The parameters of [`LIVE_WORKERS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveWorkers {
    /// A worker whose last heartbeat is older than this many seconds is dead.
    pub(crate) dead_after_secs: f64,
}

impl LiveWorkers {
    pub(crate) fn query(&self) -> Rows<'static, WorkerInfo> {
        sqlx::query_as(LIVE_WORKERS).bind(self.dead_after_secs)
    }
}

// The row of LIVE_WORKERS.
/// A registered, live worker process.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerInfo {
    pub id: i64,
    pub name: String,
    pub host: String,
    pub pid: i32,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub settings: Value,
    pub heartbeat_age_secs: f64,
}

/// The latest $1 dead requests ([`DeadRequests`]), with their last error.
pub(crate) const DEAD_REQUESTS: &str = concat!(
    "SELECT ",
    request_columns!(),
    " FROM seatq.requests WHERE status = 'dead' ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT $1"
);

/// The parameters of [`DEAD_REQUESTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeadRequests {
    /// At most this many.
    pub(crate) limit: i64,
}

impl DeadRequests {
    pub(crate) fn query(&self) -> Rows<'static, RequestRecord> {
        sqlx::query_as(DEAD_REQUESTS).bind(self.limit)
    }
}

/// Put dead requests back in the queue ([`RetryDead`]): request $1, or all
/// dead with $2. Attempts start again from zero; the last error stays until
/// the next outcome. Returns the ids requeued.
pub(crate) const RETRY_DEAD: &str = "
UPDATE seatq.requests
SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL
WHERE status = 'dead' AND (id = $1 OR $2)
RETURNING id";

/// The parameters of [`RETRY_DEAD`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryDead {
    /// The request to requeue (ignored with `all`).
    pub(crate) id: i64,
    /// Requeue every dead request.
    pub(crate) all: bool,
}

impl RetryDead {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(RETRY_DEAD).bind(self.id).bind(self.all)
    }
}
