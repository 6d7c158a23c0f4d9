//! Operations: queue stats, outcome counts and latency, an event's seats
//! by state, live workers, dead requests, pruning, the invariant check.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Client;
use crate::outcome::RequestRecord;
use crate::{Error, WORKER_DEAD_AFTER, sql};

/// A snapshot of the queue and the inventory.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stats {
    /// Requests by status (queued, succeeded, failed, dead).
    pub requests: BTreeMap<String, i64>,
    /// Seconds the oldest due, queued request has waited.
    pub oldest_queued_secs: Option<f64>,
    /// Seats by state (available, held, lapsed, booked).
    pub seats: BTreeMap<String, i64>,
}

/// One broken invariant, as reported by `seatq.check_invariants()`.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct Violation {
    pub violation: String,
    pub detail: String,
}

/// Enqueue-to-outcome latency of a set of requests, in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, sqlx::FromRow)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// Seconds from the first enqueue to the last outcome.
    pub span_secs: Option<f64>,
    /// How many of the requests are finished.
    pub finished: i64,
}

/// A registered, live worker process.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerInfo {
    pub id: i64,
    pub name: String,
    pub host: String,
    pub pid: i32,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub heartbeat_at: chrono::DateTime<chrono::Utc>,
    pub settings: Value,
    pub heartbeat_age_secs: f64,
}

/// Operations: what an operator reads and does.
impl Client {
    /// Queue depth, oldest queued age and seats by state. A producer login
    /// may call it: it counts that producer's own requests (row-level
    /// security) and every event's seats (`seatq.seats_by_state`).
    pub async fn stats(&self) -> Result<Stats, Error> {
        let requests = sqlx::query_as(seatq_core::sql::stats::REQUESTS_BY_STATUS).fetch_all(&self.pool).await?;
        let oldest_queued_secs = sqlx::query_scalar(sql::stats::OLDEST_QUEUED_AGE).fetch_one(&self.pool).await?;
        let seats = sqlx::query_as(sql::stats::SEATS_BY_STATE).fetch_all(&self.pool).await?;
        Ok(Stats { requests: requests.into_iter().collect(), oldest_queued_secs, seats: seats.into_iter().collect() })
    }

    /// Outcome counts of these requests: (kind, status or error code, count).
    pub async fn outcomes(&self, ids: &[i64]) -> Result<Vec<(String, String, i64)>, Error> {
        Ok(sqlx::query_as(sql::stats::OUTCOMES).bind(ids).fetch_all(&self.pool).await?)
    }

    /// Enqueue-to-outcome latency of these requests.
    pub async fn latency(&self, ids: &[i64]) -> Result<Latency, Error> {
        Ok(sqlx::query_as(sql::stats::LATENCY).bind(ids).fetch_one(&self.pool).await?)
    }

    /// Seats of one event by state (available, held, lapsed, booked), as
    /// [`Stats::seats`] counts every event's.
    pub async fn seats_by_state(&self, event: i64) -> Result<BTreeMap<String, i64>, Error> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as(sql::stats::EVENT_SEATS_BY_STATE).bind(event).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().collect())
    }

    /// Seats of an event taken: booked, or held and not lapsed.
    pub async fn seats_taken(&self, event: i64) -> Result<i64, Error> {
        Ok(sqlx::query_scalar(sql::stats::SEATS_TAKEN).bind(event).fetch_one(&self.pool).await?)
    }

    /// Seats of an event granted, by its live bookings' own seat lists. Equal
    /// to [`Client::seats_taken`] when the invariants hold.
    pub async fn seats_granted(&self, event: i64) -> Result<i64, Error> {
        Ok(sqlx::query_scalar(sql::stats::SEATS_GRANTED).bind(event).fetch_one(&self.pool).await?)
    }

    /// Live workers (heartbeat within [`WORKER_DEAD_AFTER`]).
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        Ok(sqlx::query_as(sql::operations::LIVE_WORKERS)
            .bind(WORKER_DEAD_AFTER.as_secs_f64())
            .fetch_all(&self.pool)
            .await?)
    }

    /// The latest `limit` dead requests (failed unexpectedly too many
    /// times), each with its last error.
    pub async fn dead_requests(&self, limit: i64) -> Result<Vec<RequestRecord>, Error> {
        Ok(sqlx::query_as(sql::operations::DEAD_REQUESTS).bind(limit).fetch_all(&self.pool).await?)
    }

    /// Put dead requests back in the queue: `Some(id)` for one, `None` for
    /// all. Returns the ids requeued.
    pub async fn retry_dead(&self, id: Option<i64>) -> Result<Vec<i64>, Error> {
        Ok(sqlx::query_scalar(sql::operations::RETRY_DEAD)
            .bind(id.unwrap_or(0))
            .bind(id.is_none())
            .fetch_all(&self.pool)
            .await?)
    }

    /// Delete every request finished more than `older_than` ago, a thousand
    /// per transaction. Returns how many.
    pub async fn prune(&self, older_than: Duration) -> Result<u64, Error> {
        const BATCH: i64 = 1000;
        let mut total = 0;
        loop {
            let deleted: i64 = sqlx::query_scalar(seatq_core::sql::retention::PRUNE_FINISHED)
                .bind(older_than.as_secs_f64())
                .bind(BATCH)
                .fetch_one(&self.pool)
                .await?;
            let deleted = u64::try_from(deleted).unwrap_or(0);
            total += deleted;
            if deleted < BATCH as u64 {
                return Ok(total);
            }
        }
    }

    /// Every broken invariant; empty means healthy. With `drained`, a request
    /// still queued counts as a violation.
    pub async fn check_invariants(&self, drained: bool) -> Result<Vec<Violation>, Error> {
        Ok(sqlx::query_as(sql::stats::CHECK_INVARIANTS).bind(drained).fetch_all(&self.pool).await?)
    }
}
