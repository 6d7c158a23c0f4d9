//! Operations: queue stats, outcome counts and latency, an event's seats
//! by state, live workers, dead requests, pruning, the invariant check.

use std::collections::BTreeMap;
use std::time::Duration;

use seatq_core::sql::{retention, stats as shared};
use serde::{Deserialize, Serialize};

use super::Client;
use crate::outcome::RequestRecord;
use crate::sql::operations::{self, WorkerInfo};
use crate::sql::stats::{self, Latency, Violation};
use crate::{Error, WORKER_DEAD_AFTER};

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

/// Operations: what an operator reads and does.
impl Client {
    /// Queue depth, oldest queued age and seats by state. A producer login
    /// may call it: it counts that producer's own requests (row-level
    /// security) and every event's seats (`seatq.seats_by_state`).
    pub async fn stats(&self) -> Result<Stats, Error> {
        let requests = shared::RequestsByStatus.query().fetch_all(&self.db).await?;
        let oldest_queued_secs = stats::OldestQueuedAge.query().fetch_one(&self.db).await?;
        let seats = stats::SeatsByState.query().fetch_all(&self.db).await?;
        Ok(Stats {
            requests: requests.into_iter().map(|r| (r.status, r.count)).collect(),
            oldest_queued_secs,
            seats: seats.into_iter().map(|s| (s.state, s.seats)).collect(),
        })
    }

    /// Outcome counts of these requests: (kind, status or error code, count).
    pub async fn outcomes(&self, ids: &[i64]) -> Result<Vec<(String, String, i64)>, Error> {
        let rows = stats::Outcomes { ids }.query().fetch_all(&self.db).await?;
        Ok(rows.into_iter().map(|r| (r.kind, r.outcome, r.count)).collect())
    }

    /// Enqueue-to-outcome latency of these requests.
    pub async fn latency(&self, ids: &[i64]) -> Result<Latency, Error> {
        Ok(stats::LatencyOf { ids }.query().fetch_one(&self.db).await?)
    }

    /// Seats of one event by state (available, held, lapsed, booked), as
    /// [`Stats::seats`] counts every event's.
    pub async fn seats_by_state(&self, event: i64) -> Result<BTreeMap<String, i64>, Error> {
        let rows = stats::EventSeatsByState { event }.query().fetch_all(&self.db).await?;
        Ok(rows.into_iter().map(|r| (r.state, r.count)).collect())
    }

    /// Seats of an event taken: booked, or held and not lapsed.
    pub async fn seats_taken(&self, event: i64) -> Result<i64, Error> {
        Ok(stats::SeatsTaken { event }.query().fetch_one(&self.db).await?)
    }

    /// Seats of an event granted, by its live bookings' own seat lists. Equal
    /// to [`Client::seats_taken`] when the invariants hold.
    pub async fn seats_granted(&self, event: i64) -> Result<i64, Error> {
        Ok(stats::SeatsGranted { event }.query().fetch_one(&self.db).await?)
    }

    /// Live workers (heartbeat within [`WORKER_DEAD_AFTER`]).
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        let live = operations::LiveWorkers { dead_after_secs: WORKER_DEAD_AFTER.as_secs_f64() };
        Ok(live.query().fetch_all(&self.db).await?)
    }

    /// The latest `limit` dead requests (failed unexpectedly too many
    /// times), each with its last error.
    pub async fn dead_requests(&self, limit: i64) -> Result<Vec<RequestRecord>, Error> {
        Ok(operations::DeadRequests { limit }.query().fetch_all(&self.db).await?)
    }

    /// Put dead requests back in the queue: `Some(id)` for one, `None` for
    /// all. Returns the ids requeued.
    pub async fn retry_dead(&self, id: Option<i64>) -> Result<Vec<i64>, Error> {
        let retry = operations::RetryDead { id: id.unwrap_or(0), all: id.is_none() };
        Ok(retry.query().fetch_all(&self.db).await?)
    }

    /// Delete every request finished more than `older_than` ago, a thousand
    /// per transaction. Returns how many.
    pub async fn prune(&self, older_than: Duration) -> Result<u64, Error> {
        const BATCH: i64 = 1000;
        let mut total = 0;
        loop {
            let prune = retention::PruneFinished { older_than_secs: older_than.as_secs_f64(), limit: BATCH };
            let deleted = prune.query().fetch_one(&self.db).await?;
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
        Ok(stats::CheckInvariants { drained }.query().fetch_all(&self.db).await?)
    }
}
