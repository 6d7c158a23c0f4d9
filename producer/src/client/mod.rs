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
    /// an error soon, for the caller to retry (see [`Retry`](crate::Retry)).
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
}
