//! [`Client`], a handle on a seatq database, and its methods, one file a
//! concern, each an `impl Client` block:
//!
//! - [`enqueue`]: one request, many in one statement, any number in one
//!   transaction with retries, unvalidated ones, one in the caller's own
//!   transaction ([`enqueue_in`](crate::enqueue_in)), idempotency conflicts;
//! - [`wait`]: a request's status now, and waiting for one, all or each of
//!   many (the waiter hub);
//! - [`batches`]: a [`Batch`](crate::Batch) checked, enqueued, its outcomes
//!   streamed, read back by name;
//! - [`storefront`]: availability and the seat map, exact or from the
//!   client's cache;
//! - [`inventory`]: events and their seats: made, imported, listed, closed,
//!   edited, deleted;
//! - [`operations`]: queue stats, latency, seats by state, workers, dead
//!   requests, pruning, the invariant check.
//!
//! This file holds the handle and its constructors; each concern's file
//! imports [`Client`] from here, and this file imports none of them.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::reach::{Db, Target};
use crate::view_cache::{DEFAULT_MAX_AGE, ViewCache};
use crate::waiters::Waiters;
use crate::{Error, db};

pub(crate) mod batches;
pub(crate) mod enqueue;
pub(crate) mod inventory;
pub(crate) mod operations;
pub(crate) mod storefront;
pub(crate) mod wait;

/// A handle on a seatq database, cheap to clone. Its clones share one pool
/// and one waiter hub: however many callers wait for outcomes at once, they
/// use one listening connection besides the pool's.
///
/// They share one cache of availability too
/// ([`Client::cached_availability`]).
///
/// How it reaches the database (directly, through a transaction pooler, and
/// where it reads availability from) is its [`Db`]'s and its read replica's
/// to know ([`crate::reach`]); its methods run the same way on any.
#[derive(Debug, Clone)]
pub struct Client {
    db: Db,
    /// Where availability and seat maps are read: a hot standby, or `db`.
    reads: Option<Db>,
    waiters: Waiters,
    views: Arc<ViewCache>,
}

impl Client {
    /// Connect to `url` (creating the database and applying migrations if
    /// needed). A URL with `?pool_mode=transaction` goes through a
    /// transaction pooler ([`crate::reach`]): the database must then exist
    /// with its schema current, and waiting polls; see
    /// [`Client::connect_with_session`].
    pub async fn connect(url: &str) -> Result<Client, Error> {
        Client::connect_to(&Target::parse(url, None)?, db::ACQUIRE_TIMEOUT).await
    }

    /// [`Client::connect`] through a transaction pooler (`url`, with
    /// `?pool_mode=transaction`), with `session_url` (direct, or a
    /// session-mode pooler) for what needs a session: creating the database,
    /// applying migrations, and listening for outcomes.
    pub async fn connect_with_session(url: &str, session_url: Option<&str>) -> Result<Client, Error> {
        Client::connect_to(&Target::parse(url, session_url)?, db::ACQUIRE_TIMEOUT).await
    }

    /// [`Client::connect`], with every wait for a connection (connecting
    /// included) bounded by `acquire_timeout`, so that an outage surfaces as
    /// an error soon, for the caller to retry (see [`Retry`](crate::Retry)).
    pub async fn connect_with_timeout(url: &str, acquire_timeout: Duration) -> Result<Client, Error> {
        Client::connect_to(&Target::parse(url, None)?, acquire_timeout).await
    }

    /// Connect to `target` with a pool of four, each wait for a connection
    /// bounded by `acquire_timeout`.
    pub async fn connect_to(target: &Target, acquire_timeout: Duration) -> Result<Client, Error> {
        let pool = PgPoolOptions::new().max_connections(4).acquire_timeout(acquire_timeout);
        Ok(Client::from_db(db::connect_target(target, pool).await?))
    }

    /// Use an existing pool of sessions of its own (direct, or a
    /// session-mode pooler); migrations must already be applied.
    pub fn from_pool(pool: PgPool) -> Client {
        Client::from_db(Db::direct(pool))
    }

    /// Use an existing [`Db`]; migrations must already be applied.
    pub fn from_db(db: Db) -> Client {
        Client { waiters: Waiters::new(db.clone()), views: Arc::new(ViewCache::new(DEFAULT_MAX_AGE)), db, reads: None }
    }

    /// This client, reading availability, seat maps and the cached view
    /// ([`crate::client::storefront`]'s reads) from the hot standby at `url`
    /// (which may carry `?pool_mode=transaction`), so that page views load
    /// a replica rather than the primary. The schema there must be current;
    /// a standby shows what it has replayed, a little behind the primary
    /// (docs/operations.md gives the lag measured). Everything else (enqueue,
    /// waiting, bookings) stays on the primary.
    ///
    /// The replica's pool is as large as the primary's, and the client's
    /// cache of views is its own (a clone of this client keeps reading the
    /// primary, and its own views).
    pub async fn with_reads_from(mut self, url: &str) -> Result<Client, Error> {
        let target = Target::parse(url, None)?;
        let target = Target { session: None, ..target };
        let primary = self.db.pool().options();
        let pool = PgPoolOptions::new()
            .max_connections(primary.get_max_connections())
            .acquire_timeout(primary.get_acquire_timeout());
        self.reads = Some(db::connect_target(&target, pool).await?);
        self.views = Arc::new(ViewCache::new(self.views.max_age()));
        Ok(self)
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

    /// The underlying pool. Through a transaction pooler, run statements on
    /// [`Client::db`] instead: they are prepared unnamed there.
    pub fn pool(&self) -> &PgPool {
        self.db.pool()
    }

    /// How this client reaches its database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Where this client reads availability: its read replica, or its
    /// database.
    pub(crate) fn reads(&self) -> &Db {
        self.reads.as_ref().unwrap_or(&self.db)
    }
}
