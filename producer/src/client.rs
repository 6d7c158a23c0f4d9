//! The producer's side: enqueue requests, read and wait for outcomes,
//! inspect the queue.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::stream::{self, BoxStream, FuturesUnordered, StreamExt as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::postgres::{PgExecutor, PgPool, PgPoolOptions};
use tokio::time::Instant;

use crate::availability::{AvailabilityView, ClassAvailability, LayoutSeat, MapSeat, SeatStates};
use crate::batch::InBatch;
use crate::outcome::{ErrorCode, RequestRecord};
use crate::request::Request;
use crate::retry::Jitter;
use crate::venue::{NewEvent, VenueSeat};
use crate::view_cache::{DEFAULT_MAX_AGE, ViewCache, ViewCacheStats};
use crate::waiters::{Finished, Waiter, Waiters};
use crate::{Error, RequestError, SeatAvailability, db, sql, sqlstate, validate};

/// Rows per statement of [`Client::enqueue_all`] (all in one transaction).
const BULK_CHUNK: usize = 1000;

/// One request to enqueue, with its queue options.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub request: Request,
    /// A second enqueue with the same key, kind and payload returns the
    /// first request's id; with another kind or payload it is refused
    /// ([`ErrorCode::IdempotencyConflict`]).
    pub idempotency_key: Option<String>,
    /// Higher runs first (default 0).
    pub priority: i16,
    /// Not to be processed before this time (default: at once).
    pub run_at: Option<DateTime<Utc>>,
    /// The batch it belongs to, with its line and ref (default: none); a
    /// [`Batch`](crate::batch::Batch) sets it on each of its parties.
    pub batch: Option<InBatch>,
}

impl NewRequest {
    /// Validate the request and its queue options, as the database does
    /// (the key, the request, then `run_at`: [`validate::check_new`]), and
    /// the batch's name and ref.
    pub fn check(&self) -> Result<(), crate::RequestError> {
        let payload = self.request.payload();
        validate::check_new(self.request.kind(), &payload, self.idempotency_key.as_deref(), self.run_at)?;
        self.batch.as_ref().map_or(Ok(()), InBatch::check)
    }
}

impl From<Request> for NewRequest {
    fn from(request: Request) -> Self {
        NewRequest { request, idempotency_key: None, priority: 0, run_at: None, batch: None }
    }
}

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

/// A handle on a seatq database, cheap to clone. Its clones share one pool
/// and one waiter hub: however many callers wait for outcomes at once, they
/// use one listening connection besides the pool's.
///
/// They share one cache of availability too
/// ([`Client::cached_availability`]).
#[derive(Debug, Clone)]
pub struct Client {
    pool: PgPool,
    waiters: Waiters,
    views: Arc<ViewCache>,
}

impl Client {
    /// Connect to `url` (creating the database and applying migrations if needed).
    pub async fn connect(url: &str) -> Result<Client, Error> {
        Ok(Client::from_pool(db::connect(db::options(url)?, 4).await?))
    }

    /// [`Client::connect`], with every wait for a connection (connecting
    /// included) bounded by `acquire_timeout`, so that an outage surfaces as
    /// an error soon, for the caller to retry (see [`Retry`]).
    pub async fn connect_with_timeout(url: &str, acquire_timeout: Duration) -> Result<Client, Error> {
        Ok(Client::from_pool(
            db::connect_pool(
                db::options(url)?,
                PgPoolOptions::new().max_connections(4).acquire_timeout(acquire_timeout),
            )
            .await?,
        ))
    }

    /// Use an existing pool (migrations must already be applied).
    pub fn from_pool(pool: PgPool) -> Client {
        Client { waiters: Waiters::new(pool.clone()), views: Arc::new(ViewCache::new(DEFAULT_MAX_AGE)), pool }
    }

    /// This client with a cache of availability of its own, whose views are
    /// at most `max_age` old when served, or up to twice that while a read
    /// for a newer one runs ([`Client::cached_availability`]; the default is
    /// [`crate::view_cache::DEFAULT_MAX_AGE`]). Zero serves no view twice:
    /// every page view reads, though concurrent ones share a read.
    pub fn with_view_max_age(mut self, max_age: Duration) -> Client {
        self.views = Arc::new(ViewCache::new(max_age));
        self
    }

    /// The maximum age of this client's cached views.
    pub fn view_max_age(&self) -> Duration {
        self.views.max_age()
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Validate and enqueue one request; returns its id. An idempotency key
    /// already used for another kind or payload is refused with
    /// [`Error::Invalid`] ([`ErrorCode::IdempotencyConflict`]).
    pub async fn enqueue(&self, new: impl Into<NewRequest>) -> Result<i64, Error> {
        enqueue_in(&self.pool, new).await
    }

    /// Validate and enqueue many requests in one statement; returns their ids
    /// in order. Nothing is enqueued if any request is invalid, or if any
    /// reuses an idempotency key for another kind or payload (the whole batch
    /// is refused with [`ErrorCode::IdempotencyConflict`], naming the key; see
    /// [`Client::idempotency_conflicts`] to find such requests first).
    pub async fn enqueue_many(&self, batch: &[NewRequest]) -> Result<Vec<i64>, Error> {
        for new in batch {
            new.check()?;
        }
        Ok(enqueue_chunk(&self.pool, batch).await?)
    }

    /// The requests of `batch` (by position, from 0) whose idempotency key
    /// was first used for another kind or payload, by a stored request or an
    /// earlier request of the batch, each with the refusal enqueueing it
    /// would meet. A check before enqueueing, to report such requests one by
    /// one (`seatq enqueue --file` does, by line); a conflicting request
    /// stored meanwhile by someone else is still refused by the enqueue.
    pub async fn idempotency_conflicts(&self, batch: &[NewRequest]) -> Result<Vec<(usize, RequestError)>, Error> {
        Ok(self
            .conflicts(batch)
            .await?
            .into_iter()
            .map(|c| {
                let message = format!(
                    "idempotency key {} was first used by {} with another kind or payload",
                    validate::quoted(&c.key),
                    c.first
                );
                (c.position, RequestError { code: ErrorCode::IdempotencyConflict, message })
            })
            .collect())
    }

    /// The requests of `batch` whose key was first used for another kind or
    /// payload (see [`Client::idempotency_conflicts`]), unworded.
    pub(crate) async fn conflicts(&self, batch: &[NewRequest]) -> Result<Vec<Conflict>, Error> {
        if batch.iter().all(|n| n.idempotency_key.is_none()) {
            return Ok(Vec::new());
        }
        let kinds: Vec<&str> = batch.iter().map(|n| n.request.kind()).collect();
        let payloads: Vec<Value> = batch.iter().map(|n| n.request.payload()).collect();
        let keys: Vec<Option<&str>> = batch.iter().map(|n| n.idempotency_key.as_deref()).collect();
        let rows: Vec<(i64, String, Option<i64>, Option<i64>)> = sqlx::query_as(sql::queue::IDEMPOTENCY_CONFLICTS)
            .bind(kinds)
            .bind(payloads)
            .bind(keys)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(position, key, first_id, first_position)| {
                let first = match (first_id, first_position) {
                    (Some(id), _) => format!("request {id}"),
                    (None, Some(p)) => format!("request {p} of this batch"),
                    (None, None) => "another request".to_string(),
                };
                Conflict { position: position as usize - 1, key, first }
            })
            .collect())
    }

    /// Validate and enqueue any number of requests in one transaction (a
    /// thousand rows per statement), all or nothing; returns their ids in
    /// order. Nothing is enqueued if any request is invalid.
    ///
    /// A connection-level failure is retried under `retry`, the whole
    /// transaction again: until COMMIT is sent nothing is stored, so that is
    /// safe even for requests without an idempotency key. If the connection
    /// is lost during COMMIT itself, the outcome is unknown to the client;
    /// it then asks the server whether that transaction committed
    /// (`pg_xact_status`), and enqueues again only if it did not, so a file
    /// is never enqueued twice. When the server cannot tell in time, the
    /// answer is [`Error::CommitUnknown`].
    pub async fn enqueue_all(&self, batch: &[NewRequest], retry: &Retry) -> Result<Vec<i64>, Error> {
        for new in batch {
            new.check()?;
        }
        let mut backoff = retry.backoff();
        let mut lost: Option<LostCommit> = None;
        loop {
            if let Some(commit) = lost.take() {
                match self.xact_status(&commit.xid).await {
                    Ok(Some(status)) if status == "committed" => return Ok(commit.ids),
                    Ok(Some(status)) if status == "aborted" => {} // nothing was stored: enqueue again
                    // The lost session has not ended yet, or the server is still away.
                    Ok(Some(status)) if status == "in progress" => {
                        let why = format!("transaction {} is still in progress", commit.xid);
                        if !backoff.sleep("the session of the lost COMMIT has not ended yet; asking again", &why).await
                        {
                            return Err(commit.unknown());
                        }
                        lost = Some(commit);
                        continue;
                    }
                    Err(e) if e.is_connection_error() => {
                        if !backoff.pause("asking whether the lost COMMIT committed", &e).await {
                            return Err(commit.unknown());
                        }
                        lost = Some(commit);
                        continue;
                    }
                    // NULL (too old to tell), or an error: the server cannot say.
                    _ => return Err(commit.unknown()),
                }
            }
            match self.enqueue_all_once(batch).await {
                Ok(ids) => return Ok(ids),
                Err(Attempt::Failed(e)) => {
                    if !backoff.pause("enqueueing", &e).await {
                        return Err(e);
                    }
                }
                Err(Attempt::CommitLost(commit)) => {
                    let what = "the connection was lost during COMMIT; asking the server whether it committed";
                    if !backoff.sleep(what, &commit.source).await {
                        return Err(commit.unknown());
                    }
                    lost = Some(commit);
                }
            }
        }
    }

    /// One attempt of [`Client::enqueue_all`].
    async fn enqueue_all_once(&self, batch: &[NewRequest]) -> Result<Vec<i64>, Attempt> {
        let failed = |e: sqlx::Error| Attempt::Failed(Error::from(e));
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let mut ids = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(BULK_CHUNK) {
            ids.extend(enqueue_chunk(&mut *tx, chunk).await.map_err(failed)?);
        }
        let xid: String = sqlx::query_scalar(sql::queue::CURRENT_XACT_ID).fetch_one(&mut *tx).await.map_err(failed)?;
        match tx.commit().await {
            Ok(()) => Ok(ids),
            Err(source) if crate::sqlstate::is_connection_level(&source) => {
                Err(Attempt::CommitLost(LostCommit { xid, ids, source }))
            }
            // The server answered: it did not commit.
            Err(e) => Err(failed(e)),
        }
    }

    /// Whether a transaction committed: `committed`, `aborted`, `in
    /// progress`, or `None` when it is too old to tell.
    async fn xact_status(&self, xid: &str) -> Result<Option<String>, Error> {
        Ok(sqlx::query_scalar(sql::queue::XACT_STATUS).bind(xid).fetch_one(&self.pool).await?)
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
        let run_at: Vec<Option<DateTime<Utc>>> = vec![None; kinds.len()];
        let none: Vec<Option<String>> = vec![None; kinds.len()];
        let ids = sqlx::query_scalar(sql::queue::ENQUEUE_MANY)
            .bind(kinds)
            .bind(payloads)
            .bind(keys)
            .bind(priorities)
            .bind(run_at)
            .bind(&none)
            .bind(&none)
            .bind(vec![None::<i32>; kinds.len()])
            .fetch_all(&self.pool)
            .await?;
        Ok(ids)
    }

    /// The request as it stands now.
    pub async fn status(&self, id: i64) -> Result<RequestRecord, Error> {
        let record = sqlx::query_as(sql::queue::GET_REQUEST).bind(id).fetch_optional(&self.pool).await?;
        record.ok_or(Error::NotFound(id))
    }

    /// Wait until the request is finished; `None` waits for ever (else
    /// [`Error::Timeout`]). Every wait on this client and its clones shares
    /// one listening connection (LISTEN `seatq_done`, a notification being
    /// only a hint to re-read the row) and one poll of every waiter's row in
    /// one statement, every 500 ms, which serves them while the listener is
    /// away; a wait given up (its future dropped) leaves the hub.
    pub async fn wait(&self, id: i64, timeout: Option<Duration>) -> Result<RequestRecord, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        // Registered before the first read, so that a finish in between is
        // not missed.
        let mut waiter = self.waiters.register(id);
        let record = self.status(id).await?;
        if record.status.is_terminal() {
            return Ok(record);
        }
        let finished = match deadline {
            Some(d) => tokio::time::timeout_at(d, waiter.finished()).await.map_err(|_| Error::Timeout(id))?,
            None => waiter.finished().await,
        };
        finished.into_result(id)
    }

    /// Wait until none of these requests is queued any more (an id with no
    /// request counts as finished); on timeout, [`Error::Timeout`] names
    /// the first still queued. Served by the same hub as [`Client::wait`],
    /// with one read for all of them at the start.
    pub async fn wait_all(&self, ids: &[i64], timeout: Option<Duration>) -> Result<(), Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut waiters: Vec<Waiter> = ids.iter().map(|id| self.waiters.register(*id)).collect();
        let done: std::collections::HashSet<i64> =
            self.waiters.read(ids).await?.into_iter().map(|(id, _)| id).collect();
        waiters.retain(|w| !done.contains(&w.id()));
        for waiter in &mut waiters {
            match deadline {
                Some(d) => {
                    if tokio::time::timeout_at(d, waiter.finished()).await.is_err() {
                        return Err(Error::Timeout(waiter.id()));
                    }
                }
                None => {
                    waiter.finished().await;
                }
            }
        }
        Ok(())
    }

    /// Wait for each of these requests, yielding each as it finishes, in the
    /// order they finish (those already finished first), until all have; a
    /// request with no row (or deleted meanwhile) yields [`Error::NotFound`].
    /// Served by the same hub as [`Client::wait`]: however many requests,
    /// one listening connection, and each read of their rows one statement
    /// for all of them. No deadline: wrap each `next()` in a timeout for one.
    pub fn wait_each(&self, ids: &[i64]) -> BoxStream<'static, Result<RequestRecord, Error>> {
        let waiters = self.waiters.clone();
        let ids = ids.to_vec();
        stream::once(async move {
            // Registered before the first read, so that a finish in between
            // is not missed.
            let registered: Vec<Waiter> = ids.iter().map(|id| waiters.register(*id)).collect();
            let done: HashMap<i64, Finished> = match waiters.read(&ids).await {
                Ok(rows) => rows.into_iter().collect(),
                // The hub reads every waiter itself at its next poll.
                Err(e) => {
                    tracing::warn!(error = %e, requests = ids.len(), "could not read the requests waited for; polling");
                    HashMap::new()
                }
            };
            let mut ready = Vec::new();
            let pending = FuturesUnordered::new();
            for mut waiter in registered {
                match done.get(&waiter.id()) {
                    Some(finished) => ready.push(finished.clone().into_result(waiter.id())),
                    None => pending.push(async move { waiter.finished().await.into_result(waiter.id()) }),
                }
            }
            stream::iter(ready).chain(pending)
        })
        .flatten()
        .boxed()
    }

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

    /// Per class of an event: seats, free, held and booked, and the price
    /// ranges of the free seats and of all, exact (read now; for a page view,
    /// [`Client::cached_availability`]). Empty for an event without seats. A
    /// producer login may call it.
    pub async fn availability(&self, event: i64) -> Result<Vec<ClassAvailability>, Error> {
        Ok(sqlx::query_as(sql::availability::AVAILABILITY).bind(event).fetch_all(&self.pool).await?)
    }

    /// Every seat of an event, in seat order, free, held, booked or not for
    /// sale (never whose), exact (read now; for a page view,
    /// [`Client::cached_availability`]). Empty for an event without seats. A
    /// producer login may call it.
    pub async fn seat_map(&self, event: i64) -> Result<Vec<MapSeat>, Error> {
        Ok(sqlx::query_as(sql::availability::SEAT_MAP).bind(event).fetch_all(&self.pool).await?)
    }

    /// The layout of an event's seats (where each is and what it costs), in
    /// seat order: the part of [`Client::seat_map`] that never changes once
    /// the seats are made. Empty for an event without seats. A producer
    /// login may call it.
    pub async fn seat_layout(&self, event: i64) -> Result<Vec<LayoutSeat>, Error> {
        Ok(sqlx::query_as(sql::availability::SEAT_LAYOUT).bind(event).fetch_all(&self.pool).await?)
    }

    /// How an event's seats stand now, compactly: the seats held, booked
    /// and not for sale (every other seat is free). With
    /// [`Client::seat_layout`], the whole map. A producer login may call it.
    pub async fn seat_states(&self, event: i64) -> Result<SeatStates, Error> {
        Ok(sqlx::query_as(sql::availability::SEAT_STATES).bind(event).fetch_one(&self.pool).await?)
    }

    /// An event's availability for a page view: the summary per class and
    /// the seat map, from this client's cache, shared by its clones. A view
    /// may be older than committed state by up to the cache's maximum age
    /// ([`Client::with_view_max_age`]), or twice that while a read for a
    /// newer one runs; one read at a time per event, whose answer (or
    /// error, [`Error::Shared`]) every page view waiting for it gets. The
    /// layout is read once per event, each new view reads only which seats
    /// are not free. A hold or book decides on committed state, never on a
    /// view: a stale view can cost a customer a `seats_taken` or `sold_out`
    /// answer, never a seat sold twice. For an exact answer, see
    /// [`Client::availability`] and [`Client::seat_map`]. A producer login
    /// may call it.
    pub async fn cached_availability(&self, event: i64) -> Result<Arc<AvailabilityView>, Error> {
        self.views.get(&self.pool, event).await
    }

    /// What this client's cache of availability has done so far.
    pub fn view_cache_stats(&self) -> ViewCacheStats {
        self.views.stats()
    }

    /// Live workers (heartbeat within [`crate::WORKER_DEAD_AFTER`]).
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        Ok(sqlx::query_as(sql::operations::LIVE_WORKERS)
            .bind(crate::WORKER_DEAD_AFTER.as_secs_f64())
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

    /// Create (or find) an event by name and give it `seats` seats, `per_row`
    /// to a row, in the classic layout (see `sql::inventory::ADD_SEATS`).
    /// Idempotent. Returns the event id.
    pub async fn add_event(&self, name: &str, seats: i32, per_row: i32) -> Result<i64, Error> {
        let ids = self.add_events(&[name.to_string()], seats, per_row).await?;
        ids.first().copied().ok_or_else(|| Error::Db(sqlx::Error::RowNotFound))
    }

    /// Events by name, each with `seats` seats, `per_row` to a row, in the
    /// classic layout, in one transaction of two statements whatever their
    /// number. Idempotent. Returns the ids in the order of `names`.
    pub async fn add_events(&self, names: &[String], seats: i32, per_row: i32) -> Result<Vec<i64>, Error> {
        let mut tx = self.pool.begin().await?;
        let ids: Vec<i64> = sqlx::query_scalar(sql::inventory::ADD_EVENTS).bind(names).fetch_all(&mut *tx).await?;
        sqlx::query(sql::inventory::ADD_SEATS).bind(&ids).bind(seats).bind(per_row.max(1)).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// The demo inventory: `flights` events named "Flight 1".. of `seats`
    /// seats, six to a row. Idempotent. Returns the event ids.
    pub async fn seed(&self, flights: i32, seats: i32) -> Result<Vec<i64>, Error> {
        let names: Vec<String> = (1..=flights).map(|n| format!("Flight {n}")).collect();
        self.add_events(&names, seats, 6).await
    }

    /// Create `event` with these seats (from a venue file:
    /// [`crate::venue`]), all in one transaction: seats numbered 1.. in the
    /// order given, one row number per section and row (in order of first
    /// appearance), seats not for sale blocked. Refused, importing nothing:
    /// an event whose fields do not hold together ([`NewEvent::check`]:
    /// [`ErrorCode::InvalidEvent`](crate::outcome::ErrorCode)), one with no
    /// seats (the same code), or a name that is taken
    /// ([`ErrorCode::EventExists`](crate::outcome::ErrorCode), naming the
    /// event that has it). Returns the event id.
    pub async fn import_event(&self, event: &NewEvent, seats: &[VenueSeat]) -> Result<i64, Error> {
        event.check()?;
        if seats.is_empty() {
            let message = "seats: the venue has no seats".to_string();
            return Err(RequestError { code: ErrorCode::InvalidEvent, message }.into());
        }
        match self.import_event_unchecked(event, seats).await {
            Err(Error::Db(e)) if sqlstate::is_unique_violation(&e) => {
                let id: Option<i64> =
                    sqlx::query_scalar(sql::inventory::EVENT_BY_NAME).bind(&event.name).fetch_optional(&self.pool).await?;
                let which = id.map_or(String::new(), |id| format!(" (event {id})"));
                let message =
                    format!("name: an event named {} exists already{which}", validate::quoted(&event.name));
                Err(RequestError { code: ErrorCode::EventExists, message }.into())
            }
            other => other,
        }
    }

    async fn import_event_unchecked(&self, event: &NewEvent, seats: &[VenueSeat]) -> Result<i64, Error> {
        let mut rows: BTreeMap<(&str, &str), i32> = BTreeMap::new();
        let row_nos: Vec<i32> = seats
            .iter()
            .map(|s| {
                let next = rows.len() as i32 + 1;
                *rows.entry((s.section.as_str(), s.row_label.as_str())).or_insert(next)
            })
            .collect();
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query_scalar(sql::inventory::IMPORT_EVENT)
            .bind(&event.name)
            .bind(&event.venue)
            .bind(event.starts_at)
            .bind(event.sales_from)
            .bind(event.sales_until)
            .bind(event.per_customer)
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(sql::inventory::IMPORT_SEATS)
            .bind(id)
            .bind(row_nos)
            .bind(seats.iter().map(|s| s.pos).collect::<Vec<_>>())
            .bind(seats.iter().map(|s| s.class).collect::<Vec<_>>())
            .bind(seats.iter().map(|s| s.price_cents).collect::<Vec<_>>())
            .bind(seats.iter().map(|s| s.section.as_str()).collect::<Vec<_>>())
            .bind(seats.iter().map(|s| s.row_label.as_str()).collect::<Vec<_>>())
            .bind(seats.iter().map(|s| s.label.as_str()).collect::<Vec<_>>())
            .bind(seats.iter().map(|s| s.for_sale).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Every event (or only `event`), with its sales window and seat
    /// counts. A producer login may call it.
    pub async fn events(&self, event: Option<i64>) -> Result<Vec<EventSummary>, Error> {
        Ok(sqlx::query_as(sql::inventory::LIST_EVENTS).bind(event).fetch_all(&self.pool).await?)
    }

    /// Event `event`'s seats by section, class and state, as a storefront
    /// sees them. A producer login may call it.
    pub async fn event_seat_map(&self, event: i64) -> Result<Vec<SeatGroup>, Error> {
        Ok(sqlx::query_as(sql::inventory::EVENT_SEAT_MAP).bind(event).fetch_all(&self.pool).await?)
    }

    /// Stop event `event`'s sales now: holds and books are refused
    /// (`sales_closed`) from then on, and live holds lapse at once (a hold
    /// never outlives its event's sales; to let checkouts under way finish,
    /// move `sales_until` a few minutes ahead with [`Client::edit_event`]
    /// instead). Whether the event exists.
    pub async fn close_event(&self, event: i64) -> Result<bool, Error> {
        let closed: Option<i64> =
            sqlx::query_scalar(sql::inventory::CLOSE_EVENT).bind(event).fetch_optional(&self.pool).await?;
        Ok(closed.is_some())
    }

    /// Change event `event`'s fields: each of `changes` that is set replaces
    /// the event's own, the result checked as an import's is
    /// ([`NewEvent::check`]; a name taken by another event is
    /// [`ErrorCode::EventExists`]). Live holds are cut to the end of the
    /// sales as edited. Whether the event exists.
    pub async fn edit_event(&self, event: i64, changes: &EventChanges) -> Result<bool, Error> {
        let mut tx = self.pool.begin().await?;
        let Some(mut edited) =
            sqlx::query_as::<_, NewEvent>(sql::inventory::LOCK_EVENT).bind(event).fetch_optional(&mut *tx).await?
        else {
            return Ok(false);
        };
        changes.apply_to(&mut edited);
        edited.check()?;
        let done = sqlx::query_scalar::<_, i64>(sql::inventory::EDIT_EVENT)
            .bind(event)
            .bind(&edited.name)
            .bind(&edited.venue)
            .bind(edited.starts_at)
            .bind(edited.sales_from)
            .bind(edited.sales_until)
            .bind(edited.per_customer)
            .fetch_optional(&mut *tx)
            .await;
        match done {
            Err(e) if sqlstate::is_unique_violation(&e) => {
                let message = format!("name: an event named {} exists already", validate::quoted(&edited.name));
                Err(RequestError { code: ErrorCode::EventExists, message }.into())
            }
            Err(e) => Err(e.into()),
            Ok(done) => {
                tx.commit().await?;
                Ok(done.is_some())
            }
        }
    }

    /// Delete event `event` and its seats: for an event made by mistake
    /// (a test import, a wrong file). Refused ([`ErrorCode::EventInUse`])
    /// once anyone booked it (a booking in any state is history the event
    /// must keep: close it instead) or while a request for it is queued.
    /// Whether the event existed.
    pub async fn delete_event(&self, event: i64) -> Result<bool, Error> {
        let mut tx = self.pool.begin().await?;
        let found: Option<NewEvent> =
            sqlx::query_as(sql::inventory::LOCK_EVENT).bind(event).fetch_optional(&mut *tx).await?;
        if found.is_none() {
            return Ok(false);
        }
        let in_use: bool = sqlx::query_scalar(sql::inventory::EVENT_IN_USE).bind(event).fetch_one(&mut *tx).await?;
        if in_use {
            let message = format!(
                "event {event} has bookings or queued requests and cannot be deleted; close its sales instead (seatq event close {event})"
            );
            return Err(RequestError { code: ErrorCode::EventInUse, message }.into());
        }
        let deleted: Option<i64> =
            sqlx::query_scalar(sql::inventory::DELETE_EVENT).bind(event).fetch_optional(&mut *tx).await?;
        tx.commit().await?;
        Ok(deleted.is_some())
    }
}

/// Changes to an event's fields ([`Client::edit_event`]): each one set
/// replaces the event's own; unset ones are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventChanges {
    pub name: Option<String>,
    pub venue: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub sales_from: Option<DateTime<Utc>>,
    pub sales_until: Option<DateTime<Utc>>,
    pub per_customer: Option<i32>,
}

impl EventChanges {
    fn apply_to(&self, event: &mut NewEvent) {
        let EventChanges { name, venue, starts_at, sales_from, sales_until, per_customer } = self.clone();
        event.name = name.unwrap_or(std::mem::take(&mut event.name));
        event.venue = venue.or(event.venue.take());
        event.starts_at = starts_at.or(event.starts_at);
        event.sales_from = sales_from.or(event.sales_from);
        event.sales_until = sales_until.or(event.sales_until);
        event.per_customer = per_customer.or(event.per_customer);
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == EventChanges::default()
    }
}

/// An event as `seatq event list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventSummary {
    pub id: i64,
    pub name: String,
    pub venue: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub sales_from: Option<DateTime<Utc>>,
    pub sales_until: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
    pub per_customer: Option<i32>,
    /// Why sales refuse now (`not_on_sale`, `sales_closed`), or none: on sale.
    pub refusal: Option<String>,
    pub seats: i64,
    pub free: i64,
    pub taken: i64,
    /// Not for sale.
    pub blocked: i64,
}

/// Seats of one section, class and state.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct SeatGroup {
    pub section: String,
    pub class: i16,
    /// How they show to a storefront: free (a lapsed hold too), held, booked
    /// or not for sale.
    pub state: SeatAvailability,
    pub seats: i64,
    pub min_price_cents: i32,
    pub max_price_cents: i32,
}

/// Validate and enqueue one request on `executor`: a connection, a pool, or
/// the caller's own transaction (`seatq::enqueue_in(&mut *tx, request)`),
/// so that, say, a shop's order row and its booking request commit together
/// or not at all. Returns the request's id; the request is processed once
/// the transaction commits (workers never see it before).
///
/// Refused like [`Client::enqueue`]: an invalid request before anything is
/// sent, and an idempotency key first used for another kind or payload with
/// [`Error::Invalid`] ([`ErrorCode::IdempotencyConflict`]). The database
/// raises the latter, which aborts the caller's transaction (PostgreSQL
/// aborts a transaction on any error); enqueue under a savepoint
/// (`tx.begin()`) to carry on after one.
pub async fn enqueue_in<'c>(executor: impl PgExecutor<'c>, new: impl Into<NewRequest>) -> Result<i64, Error> {
    let new = new.into();
    new.check()?;
    let batch = new.batch.as_ref();
    let id = sqlx::query_scalar(sql::queue::ENQUEUE)
        .bind(new.request.kind())
        .bind(new.request.payload())
        .bind(&new.idempotency_key)
        .bind(i32::from(new.priority))
        .bind(new.run_at)
        .bind(batch.map(|b| b.name.as_str()))
        .bind(batch.and_then(|b| b.reference.as_deref()))
        .bind(batch.and_then(InBatch::line_number))
        .fetch_one(executor)
        .await?;
    Ok(id)
}

/// Enqueue one chunk of requests on `executor` in one statement.
async fn enqueue_chunk<'c>(executor: impl PgExecutor<'c>, chunk: &[NewRequest]) -> Result<Vec<i64>, sqlx::Error> {
    let kinds: Vec<&str> = chunk.iter().map(|n| n.request.kind()).collect();
    let payloads: Vec<Value> = chunk.iter().map(|n| n.request.payload()).collect();
    let keys: Vec<Option<&str>> = chunk.iter().map(|n| n.idempotency_key.as_deref()).collect();
    let priorities: Vec<i32> = chunk.iter().map(|n| i32::from(n.priority)).collect();
    let run_at: Vec<Option<DateTime<Utc>>> = chunk.iter().map(|n| n.run_at).collect();
    let batches: Vec<Option<&str>> = chunk.iter().map(|n| n.batch.as_ref().map(|b| b.name.as_str())).collect();
    let refs: Vec<Option<&str>> = chunk.iter().map(|n| n.batch.as_ref().and_then(|b| b.reference.as_deref())).collect();
    let lines: Vec<Option<i32>> = chunk.iter().map(|n| n.batch.as_ref().and_then(InBatch::line_number)).collect();
    sqlx::query_scalar(sql::queue::ENQUEUE_MANY)
        .bind(kinds)
        .bind(payloads)
        .bind(keys)
        .bind(priorities)
        .bind(run_at)
        .bind(batches)
        .bind(refs)
        .bind(lines)
        .fetch_all(executor)
        .await
}

/// A request of a batch whose idempotency key was first used for another
/// kind or payload.
pub(crate) struct Conflict {
    /// Its place in the batch, from 0.
    pub(crate) position: usize,
    pub(crate) key: String,
    /// The first use: `request N`, or `request N of this batch`.
    pub(crate) first: String,
}

/// How one attempt of [`Client::enqueue_all`] failed.
enum Attempt {
    /// Before COMMIT, or refused by the server: nothing was stored.
    Failed(Error),
    /// The connection was lost during COMMIT: it may have committed.
    CommitLost(LostCommit),
}

/// A transaction whose COMMIT was sent but not answered.
struct LostCommit {
    /// Its id, as `pg_current_xact_id()` gave it.
    xid: String,
    /// The ids its statements returned (valid if it committed).
    ids: Vec<i64>,
    /// How the connection was lost.
    source: sqlx::Error,
}

impl LostCommit {
    fn unknown(self) -> Error {
        Error::CommitUnknown { xid: self.xid, source: self.source }
    }
}

/// Retrying connection-level failures ([`Error::is_connection_error`]) with
/// jittered exponential backoff, for a bounded time. Anything else (a
/// refused request, an SQL error) is returned at once.
///
/// Retrying is safe for an operation that is idempotent: reading, waiting,
/// enqueueing with an idempotency key (a retry returns the first request),
/// or a whole transaction that did not commit ([`Client::enqueue_all`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Give up once an operation has kept failing for this long (counted from
    /// its first failure; an attempt that ran longer than this before failing
    /// starts the count again). Zero never retries.
    pub budget: Duration,
    /// The first pause; each next one doubles, up to `max_delay`. Each pause
    /// is jittered: half to all of its nominal length.
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Retry {
    /// Never retry.
    pub const NEVER: Retry = Retry::within(Duration::ZERO);

    /// Retry for up to `budget`, pausing 100 ms doubling to 5 s.
    pub const fn within(budget: Duration) -> Retry {
        Retry { budget, first_delay: Duration::from_millis(100), max_delay: Duration::from_secs(5) }
    }

    /// Run `op` until it succeeds, fails with an error that is not
    /// connection-level, or the budget is spent. Each retry is logged
    /// (`warn`), naming `what` failed.
    pub async fn run<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let mut backoff = self.backoff();
        loop {
            match op().await {
                Err(e) if backoff.pause(what, &e).await => continue,
                done => return done,
            }
        }
    }

    /// The pauses of one operation, for a hand-written retry loop.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            retry: *self,
            failing_since: None,
            attempt_started: Instant::now(),
            delays: Jitter::at_most(self.first_delay, self.max_delay),
            retries: 0,
        }
    }
}

/// The state of one operation's retries (see [`Retry::backoff`]).
#[derive(Debug)]
pub struct Backoff {
    retry: Retry,
    failing_since: Option<Instant>,
    attempt_started: Instant,
    /// The pauses of the current outage.
    delays: Jitter,
    retries: u32,
}

impl Backoff {
    /// After a failed attempt: if `error` is connection-level and the budget
    /// is not spent, log "`what` failed; retrying" (`warn`), sleep a jittered
    /// pause and return `true` (try again); else return `false`.
    pub async fn pause(&mut self, what: &str, error: &Error) -> bool {
        if !error.is_connection_error() {
            return false;
        }
        let brief = match error {
            // Without the set-up advice, which is for the final error.
            Error::Unreachable { target, source } => format!("cannot reach PostgreSQL at {target}: {source}"),
            e => e.to_string(),
        };
        self.sleep(&format!("{what} failed; retrying"), &brief).await
    }

    /// Like [`Backoff::pause`], for a failure known to be worth retrying;
    /// logs `message` and `why`.
    pub async fn sleep(&mut self, message: &str, why: &dyn std::fmt::Display) -> bool {
        let now = Instant::now();
        // An attempt that worked for longer than the whole budget before
        // failing ends the previous outage: this is a new one.
        if now - self.attempt_started > self.retry.budget {
            self.failing_since = None;
            self.delays.reset();
        }
        let since = *self.failing_since.get_or_insert(now);
        let left = self.retry.budget.saturating_sub(now - since);
        if left.is_zero() {
            return false;
        }
        let pause = self.delays.next_delay().min(left);
        self.retries += 1;
        tracing::warn!(retry = self.retries, in_ms = pause.as_millis() as u64, error = %why, "{message}");
        tokio::time::sleep(pause).await;
        self.attempt_started = Instant::now();
        true
    }
}

/// A fresh idempotency key, `{prefix}-` and 32 random hex digits.
pub fn new_idempotency_key(prefix: &str) -> String {
    format!("{prefix}-{:016x}{:016x}", random_u64(), random_u64())
}

/// 64 random bits from the standard library: SipHash under the process's
/// random keys, over a counter, the time and the process id.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}
