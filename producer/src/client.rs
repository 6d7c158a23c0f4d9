//! The producer's side: enqueue requests, read and wait for outcomes,
//! inspect the queue.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgRow};
use tokio::time::Instant;

use crate::outcome::{RequestRecord, Status};
use crate::request::Request;
use crate::{Error, db, sql};

/// How often [`Client::wait`] re-reads the request when no NOTIFY arrives
/// (notifications are hints: one sent while the listener reconnects is lost).
const WAIT_POLL: Duration = Duration::from_millis(500);

/// One request to enqueue, with its queue options.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub request: Request,
    /// A second enqueue with the same key returns the first request's id.
    pub idempotency_key: Option<String>,
    /// Higher runs first (default 0).
    pub priority: i16,
}

impl From<Request> for NewRequest {
    fn from(request: Request) -> Self {
        NewRequest { request, idempotency_key: None, priority: 0 }
    }
}

/// A snapshot of the queue and the inventory.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

/// A handle on a seatq database, cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    pool: PgPool,
}

impl Client {
    /// Connect to `url` (creating the database and applying migrations if needed).
    pub async fn connect(url: &str) -> Result<Client, Error> {
        Ok(Client { pool: db::connect(db::options(url)?, 4).await? })
    }

    /// Use an existing pool (migrations must already be applied).
    pub fn from_pool(pool: PgPool) -> Client {
        Client { pool }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Validate and enqueue one request; returns its id.
    pub async fn enqueue(&self, new: impl Into<NewRequest>) -> Result<i64, Error> {
        let new = new.into();
        new.request.validate()?;
        let id = sqlx::query_scalar(sql::queue::ENQUEUE)
            .bind(new.request.kind())
            .bind(new.request.payload())
            .bind(new.idempotency_key)
            .bind(i32::from(new.priority))
            .fetch_one(&self.pool)
            .await?;
        Ok(id)
    }

    /// Validate and enqueue many requests in one statement; returns their ids
    /// in order. Nothing is enqueued if any request is invalid.
    pub async fn enqueue_many(&self, batch: &[NewRequest]) -> Result<Vec<i64>, Error> {
        for new in batch {
            new.request.validate()?;
        }
        let kinds: Vec<&str> = batch.iter().map(|n| n.request.kind()).collect();
        let payloads: Vec<Value> = batch.iter().map(|n| n.request.payload()).collect();
        self.enqueue_raw(&kinds, &payloads, batch.iter().map(|n| (n.idempotency_key.clone(), n.priority))).await
    }

    /// Enqueue requests exactly as given, unvalidated (the worker will fail
    /// bad ones with a clear error). For tools that pass JSON straight through.
    pub async fn enqueue_raw(
        &self,
        kinds: &[&str],
        payloads: &[Value],
        options: impl Iterator<Item = (Option<String>, i16)>,
    ) -> Result<Vec<i64>, Error> {
        let (keys, priorities): (Vec<Option<String>>, Vec<i32>) = options.map(|(k, p)| (k, i32::from(p))).unzip();
        let ids = sqlx::query_scalar(sql::queue::ENQUEUE_MANY)
            .bind(kinds)
            .bind(payloads)
            .bind(keys)
            .bind(priorities)
            .fetch_all(&self.pool)
            .await?;
        Ok(ids)
    }

    /// The request as it stands now.
    pub async fn status(&self, id: i64) -> Result<RequestRecord, Error> {
        let row = sqlx::query(sql::queue::GET_REQUEST).bind(id).fetch_optional(&self.pool).await?;
        row.map(|r| record(&r)).transpose()?.ok_or(Error::NotFound(id))
    }

    /// Wait until the request is finished, woken by NOTIFY with a fallback
    /// poll; `None` waits for ever.
    pub async fn wait(&self, id: i64, timeout: Option<Duration>) -> Result<RequestRecord, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut listener = db::listen(&self.pool, sql::queue::DONE_CHANNEL).await?;
        loop {
            // Read after LISTEN, so a finish between the two is not missed.
            let record = self.status(id).await?;
            if record.status.is_terminal() {
                return Ok(record);
            }
            let nap = match deadline {
                Some(d) if Instant::now() >= d => return Err(Error::Timeout(id)),
                Some(d) => WAIT_POLL.min(d - Instant::now()),
                None => WAIT_POLL,
            };
            let wanted = id.to_string();
            let _ = tokio::time::timeout(nap, async {
                while let Ok(n) = listener.recv().await {
                    if n.payload() == wanted {
                        break;
                    }
                }
            })
            .await;
        }
    }

    /// Wait until none of these requests is queued any more.
    pub async fn wait_all(&self, ids: &[i64], timeout: Option<Duration>) -> Result<(), Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let left: i64 = sqlx::query_scalar(sql::queue::COUNT_UNFINISHED).bind(ids).fetch_one(&self.pool).await?;
            if left == 0 {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let first = ids.first().copied().unwrap_or_default();
                return Err(Error::Timeout(first));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Queue depth, oldest queued age and seats by state.
    pub async fn stats(&self) -> Result<Stats, Error> {
        let requests = sqlx::query_as(sql::stats::REQUESTS_BY_STATUS).fetch_all(&self.pool).await?;
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

    /// Seats of one event by state.
    pub async fn event_seats(&self, event: i64) -> Result<BTreeMap<String, i64>, Error> {
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

    /// Live workers (heartbeat within [`crate::WORKER_DEAD_AFTER`]).
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        Ok(sqlx::query_as(sql::operations::LIVE_WORKERS)
            .bind(crate::WORKER_DEAD_AFTER.as_secs_f64())
            .fetch_all(&self.pool)
            .await?)
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
            let deleted = sqlx::query(sql::operations::PRUNE_FINISHED)
                .bind(older_than.as_secs_f64())
                .bind(BATCH)
                .execute(&self.pool)
                .await?
                .rows_affected();
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

    /// Create (or find) an event by name and give it `seats` seats, `per_row`
    /// to a row, in the classic layout (see `sql::inventory::ADD_SEATS`).
    /// Idempotent. Returns the event id.
    pub async fn add_event(&self, name: &str, seats: i32, per_row: i32) -> Result<i64, Error> {
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query_scalar(sql::inventory::ADD_EVENT).bind(name).fetch_one(&mut *tx).await?;
        sqlx::query(sql::inventory::ADD_SEATS).bind(id).bind(seats).bind(per_row.max(1)).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The demo inventory: `flights` events named "Flight 1".. of `seats`
    /// seats, six to a row. Idempotent. Returns the event ids.
    pub async fn seed(&self, flights: i32, seats: i32) -> Result<Vec<i64>, Error> {
        let mut ids = Vec::with_capacity(flights.max(0) as usize);
        for n in 1..=flights {
            ids.push(self.add_event(&format!("Flight {n}"), seats, 6).await?);
        }
        Ok(ids)
    }
}

fn record(row: &PgRow) -> Result<RequestRecord, Error> {
    let status: String = row.try_get("status")?;
    Ok(RequestRecord {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        payload: row.try_get("payload")?,
        idempotency_key: row.try_get("idempotency_key")?,
        priority: row.try_get("priority")?,
        status: Status::parse(&status)
            .ok_or_else(|| Error::Db(sqlx::Error::Decode(format!("unknown request status {status:?}").into())))?,
        attempts: row.try_get("attempts")?,
        contention_retries: row.try_get("contention_retries")?,
        run_at: row.try_get("run_at")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        result: row.try_get("result")?,
        error_code: row.try_get("error_code")?,
        error_message: row.try_get("error_message")?,
    })
}
