//! Reading a request's outcome: as it stands ([`Client::status`]), or once
//! it is finished, for one request, all of many, or each of many as it
//! finishes, every wait of a client served by its waiter hub
//! ([`crate::waiters`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::stream::{self, BoxStream, FuturesUnordered, StreamExt as _};
use tokio::time::Instant;

use super::Client;
use crate::Error;
use crate::outcome::RequestRecord;
use crate::sql::queue::{BookingTokenHash, GetRequest, GetRequestHeld, PlaceOf};
use crate::token::HoldToken;
use crate::waiters::{Finished, Waiter};

/// Waiting for outcomes.
impl Client {
    /// The request as it stands now.
    pub async fn status(&self, id: i64) -> Result<RequestRecord, Error> {
        let record = GetRequest { id }.query().fetch_optional(&self.db).await?;
        self.placed(record.ok_or(Error::NotFound(id))?).await
    }

    /// The record with its place, where it is in its event's line or on
    /// its waiting list ([`RequestRecord::place`]).
    async fn placed(&self, mut record: RequestRecord) -> Result<RequestRecord, Error> {
        let event = record.payload.get("event").and_then(serde_json::Value::as_i64);
        if let (true, false, Some(event)) = (record.line, record.status.is_terminal(), event) {
            let place =
                PlaceOf { event, request: record.id, status: record.status }.query().fetch_one(&self.db).await?;
            record.place = place.map(|p| p.0);
        }
        Ok(record)
    }

    /// The request as it stands now, for the holder of the hold token it
    /// carried: [`Error::NotFound`] unless it carried `token` (compared in
    /// constant time), exactly as for a request that does not exist. What
    /// `seatq serve` answers a stranger asking for a request.
    pub async fn status_for(&self, id: i64, token: &HoldToken) -> Result<RequestRecord, Error> {
        let row = GetRequestHeld { id }.query().fetch_optional(&self.db).await?;
        match row {
            Some(held) if token.hash().matches(held.token_hash.as_deref()) => self.placed(held.record).await,
            _ => Err(Error::NotFound(id)),
        }
    }

    /// Whether `booking` exists and answers to `token` (it was made by a
    /// request carrying it), compared in constant time.
    pub async fn booking_answers_to(&self, booking: i64, token: &HoldToken) -> Result<bool, Error> {
        let stored = BookingTokenHash { booking }.query().fetch_optional(&self.db).await?;
        Ok(token.hash().matches(stored.flatten().as_deref()))
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
        let done: HashSet<i64> = self.waiters.read(ids).await?.into_iter().map(|(id, _)| id).collect();
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
}
