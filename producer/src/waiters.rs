//! The waiter hub: every caller of [`Client::wait`](crate::Client::wait)
//! and [`Client::wait_all`](crate::Client::wait_all) on one client (and its
//! clones) shares one LISTEN connection on `seatq_done` and one fallback
//! poll, so a shop with hundreds of customers in checkout uses a handful of
//! connections, not one per customer.
//!
//! A notification is only a hint (anyone may NOTIFY any channel, and one
//! sent while the listener reconnects is lost): a waiter is answered only
//! from its row, re-read and seen finished. Rows are read in batches: the ids
//! hinted since the last read, and every waiter's at each poll and after the
//! listener (re)connects, each time in one statement.
//!
//! The hub runs while anyone waits (started by the first waiter, stopped
//! after [`LINGER`] without waiters), as two tasks: the listener, which
//! only marks ids, and the reader, which reads rows and answers waiters.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::outcome::RequestRecord;
use crate::reach::Db;
use crate::{Error, db, sql};

/// How often every waiter's row is re-read whatever the notifications say
/// (they are hints: one sent while the listener reconnects is lost).
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// How long the hub keeps its listening connection after the last waiter
/// left, so that a steady trickle of waits does not reconnect each time.
const LINGER: Duration = Duration::from_secs(5);

/// What a waiter is answered: its finished row, or that it has none.
#[derive(Debug, Clone)]
pub(crate) enum Finished {
    Done(Box<RequestRecord>),
    /// No request with this id (never was, or deleted while waited for).
    Gone,
}

impl Finished {
    /// The record of request `id`, or [`Error::NotFound`].
    pub(crate) fn into_result(self, id: i64) -> Result<RequestRecord, Error> {
        match self {
            Finished::Done(record) => Ok(*record),
            Finished::Gone => Err(Error::NotFound(id)),
        }
    }
}

/// The hub of one client; cheap to clone.
#[derive(Clone)]
pub(crate) struct Waiters {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("Waiters").field("waiting", &state.waiting.len()).field("running", &state.running).finish()
    }
}

struct Shared {
    db: Db,
    state: Mutex<State>,
    /// Wakes the reader: ids were hinted, or everyone needs a re-read.
    kick: Notify,
}

#[derive(Default)]
struct State {
    /// Each waited-for id, with its waiters' channel (one per id, however
    /// many wait for it).
    waiting: HashMap<i64, watch::Sender<Option<Finished>>>,
    /// Ids notified since the reader last read.
    hinted: HashSet<i64>,
    /// Re-read every waiter: the listener (re)connected, so notifications
    /// may have been missed.
    recheck_all: bool,
    /// Whether the hub's tasks are running.
    running: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the map consistent (every
        // change is one insert or remove), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Waiters {
    pub(crate) fn new(db: Db) -> Waiters {
        Waiters { shared: Arc::new(Shared { db, state: Mutex::default(), kick: Notify::new() }) }
    }

    /// Start waiting for `id` (starting the hub if it is not running). The
    /// caller reads the row once itself after this, so a request that
    /// finished before the hub listened is not missed.
    pub(crate) fn register(&self, id: i64) -> Waiter {
        let mut state = self.shared.lock();
        let rx = state.waiting.entry(id).or_insert_with(|| watch::channel(None).0).subscribe();
        if !state.running {
            state.running = true;
            // Everyone registered so far is re-read once the listener is up.
            state.recheck_all = true;
            tokio::spawn(run(Arc::clone(&self.shared)));
        }
        Waiter { shared: Arc::clone(&self.shared), id, rx: Some(rx) }
    }

    /// Read the rows of `ids` now, in one statement: finished and gone ones
    /// by id (requests still queued are left out).
    pub(crate) async fn read(&self, ids: &[i64]) -> Result<Vec<(i64, Finished)>, Error> {
        read(&self.shared.db, ids).await
    }
}

/// One caller's wait for one request; dropping it (a wait given up) takes it
/// off the hub.
pub(crate) struct Waiter {
    shared: Arc<Shared>,
    id: i64,
    rx: Option<watch::Receiver<Option<Finished>>>,
}

impl Waiter {
    pub(crate) fn id(&self) -> i64 {
        self.id
    }

    /// The answer, once the hub has one.
    pub(crate) async fn finished(&mut self) -> Finished {
        loop {
            if let Some(rx) = self.rx.as_mut()
                && let Ok(value) = rx.wait_for(Option::is_some).await
                && let Some(finished) = value.clone()
            {
                return finished;
            }
            // The hub stopped without answering (its task ended abnormally
            // and dropped every waiter): register again, which restarts it.
            let again = Waiters { shared: Arc::clone(&self.shared) }.register(self.id);
            self.rx = again.take_rx();
        }
    }

    fn take_rx(mut self) -> Option<watch::Receiver<Option<Finished>>> {
        self.rx.take()
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let Some(rx) = self.rx.take() else { return };
        let mut state = self.shared.lock();
        drop(rx);
        if state.waiting.get(&self.id).is_some_and(|tx| tx.receiver_count() == 0) {
            state.waiting.remove(&self.id);
        }
    }
}

/// Read `ids` in one statement (see [`sql::queue::FINISHED_OR_GONE`]).
async fn read(db: &Db, ids: &[i64]) -> Result<Vec<(i64, Finished)>, Error> {
    let rows = sql::queue::FinishedOrGone { ids }.query().fetch_all(db).await?;
    Ok(rows.into_iter().map(|row| (row.wanted, row.record.map_or(Finished::Gone, Finished::Done))).collect())
}

/// Stops the listener task with the reader, and if the reader ends any other
/// way than by running out of waiters (a panic), marks the hub stopped and
/// drops every waiter's channel, so that they register again and restart it.
struct Stopping {
    shared: Arc<Shared>,
    listener: tokio::task::JoinHandle<()>,
    /// The reader ran out of waiters and marked the hub stopped itself (a
    /// new waiter may have started another since).
    idle: bool,
}

impl Drop for Stopping {
    fn drop(&mut self) {
        self.listener.abort();
        if self.idle {
            return;
        }
        let mut state = self.shared.lock();
        if state.running {
            state.running = false;
            state.waiting.clear();
            state.hinted.clear();
        }
    }
}

/// The reader: re-read hinted ids as hints come, everyone's at every poll
/// and after the listener (re)connects; answer the finished; stop after
/// [`LINGER`] without waiters.
async fn run(shared: Arc<Shared>) {
    let listener = tokio::spawn(listen(Arc::clone(&shared)));
    let mut stopping = Stopping { listener, shared: Arc::clone(&shared), idle: false };
    serve(&shared).await;
    stopping.idle = true;
}

/// The reader's loop; returns once the hub is marked stopped for want of waiters.
async fn serve(shared: &Shared) {
    let mut next_poll = Instant::now() + POLL;
    let mut idle_since: Option<Instant> = None;
    loop {
        tokio::select! {
            () = shared.kick.notified() => {}
            () = tokio::time::sleep_until(next_poll) => {
                next_poll = Instant::now() + POLL;
                shared.lock().recheck_all = true;
            }
        }
        let ids: Vec<i64> = {
            let mut state = shared.lock();
            if state.waiting.is_empty() {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= LINGER {
                    state.running = false;
                    state.hinted.clear();
                    return;
                }
                state.hinted.clear();
                continue;
            }
            idle_since = None;
            if std::mem::take(&mut state.recheck_all) {
                state.hinted.clear();
                state.waiting.keys().copied().collect()
            } else {
                let state = &mut *state;
                state.hinted.drain().filter(|id| state.waiting.contains_key(id)).collect()
            }
        };
        if ids.is_empty() {
            continue;
        }
        match read(&shared.db, &ids).await {
            Ok(rows) => {
                let mut state = shared.lock();
                for (id, finished) in rows {
                    if let Some(tx) = state.waiting.remove(&id) {
                        tx.send_replace(Some(finished));
                    }
                }
            }
            // The next poll reads everyone again.
            Err(e) => tracing::warn!(error = %e, waiters = ids.len(), "could not read the requests waited for"),
        }
    }
}

/// The listener: LISTEN on `seatq_done` and mark each notified id that
/// someone waits for. While its connection is lost, waiters are served by
/// the reader's poll; once it is back, everyone is re-read, since
/// notifications sent meanwhile are lost.
async fn listen(shared: Arc<Shared>) {
    let channel = seatq_core::sql::notify::DONE_CHANNEL;
    loop {
        let what = "finished requests (polling meanwhile)";
        // Without a session to listen on, the reader's poll serves everyone.
        let Some(mut listener) = db::listen_until_connected(&shared.db, channel, what).await else { return };
        recheck_all(&shared);
        if let Err(e) = receive(&shared, &mut listener).await {
            tracing::warn!(error = %e, "lost the connection listening for finished requests; polling meanwhile");
        }
    }
}

/// Mark notified ids until the connection fails; a reconnection made by
/// the listener itself (`Ok(None)`) also re-reads everyone.
async fn receive(shared: &Shared, listener: &mut PgListener) -> Result<(), sqlx::Error> {
    loop {
        match listener.try_recv().await? {
            Some(notification) => {
                let Ok(id) = notification.payload().parse::<i64>() else { continue };
                let mut state = shared.lock();
                if state.waiting.contains_key(&id) {
                    state.hinted.insert(id);
                    drop(state);
                    shared.kick.notify_one();
                }
            }
            None => recheck_all(shared),
        }
    }
}

fn recheck_all(shared: &Shared) {
    shared.lock().recheck_all = true;
    shared.kick.notify_one();
}
