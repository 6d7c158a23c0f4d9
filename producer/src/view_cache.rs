//! The storefront's cache of availability: per event, the last
//! [`AvailabilityView`] read, shared by every page view of a client (and its
//! clones), so that a busy on-sale reads an event's seats a few times a
//! second however many customers look at it.
//!
//! - **The layout is read once** per event and kept (it never changes once
//!   the seats are made); a read of the states (`seatq.seat_states`: one row
//!   naming the seats that are not free) makes each new view. When the
//!   states count more seats than the kept layout holds (seats were added),
//!   layout and states are read again together, in one snapshot.
//! - **Freshness**: a view younger than the cache's `max_age` is served as
//!   it is. An older one, up to twice `max_age`, is still served while one
//!   read for a newer view runs in the background; older than that (or
//!   none yet), page views wait for a read. So no view served is older than
//!   twice `max_age`, counted from when its read was sent.
//! - **Single flight**: one read at a time per event; every page view
//!   waiting meanwhile gets its view, or its error ([`Error::Shared`]). A
//!   failed read's error is kept as long as a view would be: page views
//!   within `max_age` of it get it without reading again, so a database in
//!   trouble is asked once per `max_age` per event, not once per page view.
//!
//! A stale view costs a customer at most a `seats_taken` or `sold_out`
//! answer: holds and books always decide on the seats' committed state in
//! the worker, never on a view.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use seatq_core::reach::Db;
use serde::Serialize;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use crate::availability::{AvailabilityView, LayoutSeat};
use crate::{Error, sql};

/// How old a view may be before a page view asks for a newer one, unless
/// the client is given another ([`crate::Client::with_view_max_age`]).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_millis(500);

/// Events a cache keeps at most, and seats of all their layouts at most (a
/// 20,000-seat venue's layout is a few megabytes); past either, the events
/// viewed least recently are dropped.
const MAX_EVENTS: usize = 1024;
const MAX_SEATS: usize = 2_000_000;

/// What a client's cache has done since the client was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ViewCacheStats {
    /// Page views served a view younger than the maximum age.
    pub fresh: u64,
    /// Page views served an older view while a read for a newer one ran.
    pub stale: u64,
    /// Page views that waited for a read (the first of an event, or after a
    /// lull of more than twice the maximum age).
    pub waited: u64,
    /// Of those, how many were served by a read another page view made.
    pub shared: u64,
    /// Page views answered with the error of a read that failed less than
    /// the maximum age before, without reading again.
    pub errors: u64,
    /// Database reads made, and how many of them failed.
    pub reads: u64,
    pub failed_reads: u64,
}

/// The cache of one client and its clones.
pub(crate) struct ViewCache {
    max_age: Duration,
    slots: Mutex<HashMap<i64, Arc<Slot>>>,
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    fresh: AtomicU64,
    stale: AtomicU64,
    waited: AtomicU64,
    shared: AtomicU64,
    errors: AtomicU64,
    reads: AtomicU64,
    failed_reads: AtomicU64,
}

/// One event's place in the cache.
struct Slot {
    event: i64,
    state: Mutex<SlotState>,
    /// Held by whoever reads the database for this event: one read at a
    /// time.
    reading: Arc<tokio::sync::Mutex<()>>,
}

struct SlotState {
    /// The newest view read.
    view: Option<Arc<AvailabilityView>>,
    layout: Option<Arc<[LayoutSeat]>>,
    /// Reads finished, and the error of the last one if it failed (and
    /// when): a page view that waited while a read ran takes that read's
    /// answer.
    reads: u64,
    failed: Option<(Arc<Error>, Instant)>,
    /// When a page view last asked (which events to drop first).
    used: Instant,
}

impl std::fmt::Debug for ViewCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewCache")
            .field("max_age", &self.max_age)
            .field("events", &lock(&self.slots).len())
            .field("stats", &self.stats())
            .finish()
    }
}

/// Lock a mutex whose data stays consistent even if a holder panicked
/// (every change under these locks is a few plain assignments).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ViewCache {
    pub(crate) fn new(max_age: Duration) -> ViewCache {
        ViewCache { max_age, slots: Mutex::default(), counters: Arc::default() }
    }

    pub(crate) fn max_age(&self) -> Duration {
        self.max_age
    }

    pub(crate) fn stats(&self) -> ViewCacheStats {
        let c = &self.counters;
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        ViewCacheStats {
            fresh: get(&c.fresh),
            stale: get(&c.stale),
            waited: get(&c.waited),
            shared: get(&c.shared),
            errors: get(&c.errors),
            reads: get(&c.reads),
            failed_reads: get(&c.failed_reads),
        }
    }

    /// The view of `event` for a page view (see the module's documentation).
    pub(crate) async fn get(&self, pool: &Db, event: i64) -> Result<Arc<AvailabilityView>, Error> {
        let count = |n: &AtomicU64| n.fetch_add(1, Ordering::Relaxed);
        let slot = self.slot(event);
        let (view, failed, reads_seen) = {
            let mut state = lock(&slot.state);
            state.used = Instant::now();
            // A failure younger than the maximum age is still the answer.
            let failed = state.failed.as_ref().filter(|(_, at)| at.elapsed() < self.max_age).map(|(e, _)| e.clone());
            (state.view.clone(), failed, state.reads)
        };
        if let Some(view) = view {
            let age = view.age();
            if age < self.max_age {
                count(&self.counters.fresh);
                return Ok(view);
            }
            if age < self.max_age.saturating_mul(2) {
                // Serve this one; make sure a read for the next is under way
                // (unless one failed just now), in a task of its own, so that
                // no page view waits for it.
                if failed.is_none()
                    && let Ok(guard) = Arc::clone(&slot.reading).try_lock_owned()
                {
                    let (slot, pool, counters) = (Arc::clone(&slot), pool.clone(), Arc::clone(&self.counters));
                    tokio::spawn(async move {
                        if let Err(error) = slot.read(&pool, &counters, guard).await {
                            tracing::warn!(event = slot.event, %error, "reading availability for the cache failed");
                        }
                    });
                }
                count(&self.counters.stale);
                return Ok(view);
            }
        }
        if let Some(error) = failed {
            count(&self.counters.errors);
            return Err(Error::Shared(error));
        }
        count(&self.counters.waited);
        let guard = Arc::clone(&slot.reading).lock_owned().await;
        {
            let state = lock(&slot.state);
            if state.reads != reads_seen {
                // A read finished while this page view waited: its answer.
                if let Some((error, _)) = &state.failed {
                    count(&self.counters.shared);
                    return Err(Error::Shared(Arc::clone(error)));
                }
                if let Some(view) = &state.view {
                    count(&self.counters.shared);
                    return Ok(Arc::clone(view));
                }
            }
        }
        slot.read(pool, &self.counters, guard).await
    }

    /// The slot of `event`, made if new (dropping the events viewed least
    /// recently if the cache is full).
    fn slot(&self, event: i64) -> Arc<Slot> {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get(&event) {
            return Arc::clone(slot);
        }
        loop {
            let mut seats = 0;
            let mut oldest: Option<(Instant, i64)> = None;
            for (id, slot) in slots.iter() {
                let state = lock(&slot.state);
                seats += state.layout.as_ref().map_or(0, |l| l.len());
                if oldest.is_none_or(|(used, _)| state.used < used) {
                    oldest = Some((state.used, *id));
                }
            }
            match oldest {
                Some((_, id)) if slots.len() >= MAX_EVENTS || seats > MAX_SEATS => slots.remove(&id),
                _ => break,
            };
        }
        let slot = Arc::new(Slot {
            event,
            state: Mutex::new(SlotState { view: None, layout: None, reads: 0, failed: None, used: Instant::now() }),
            reading: Arc::default(),
        });
        slots.insert(event, Arc::clone(&slot));
        slot
    }
}

impl Slot {
    /// Read a new view (holding `_reading`, this event's read lock), keep
    /// it, and return it; or keep and return the error.
    async fn read(
        &self,
        pool: &Db,
        counters: &Counters,
        _reading: OwnedMutexGuard<()>,
    ) -> Result<Arc<AvailabilityView>, Error> {
        let layout = lock(&self.state).layout.clone();
        let result = read_view(pool, self.event, layout).await;
        counters.reads.fetch_add(1, Ordering::Relaxed);
        let mut state = lock(&self.state);
        state.reads += 1;
        match result {
            Ok(view) => {
                state.layout = Some(Arc::clone(view.layout()));
                state.view = Some(Arc::clone(&view));
                state.failed = None;
                Ok(view)
            }
            Err(error) => {
                counters.failed_reads.fetch_add(1, Ordering::Relaxed);
                // The previous view stays, for page views while it is young enough.
                let error = Arc::new(error);
                state.failed = Some((Arc::clone(&error), Instant::now()));
                Err(Error::Shared(error))
            }
        }
    }
}

/// A new view of `event`: its states, with the `layout` kept if it still
/// fits them; else the layout and the states together, in one snapshot.
async fn read_view(pool: &Db, event: i64, layout: Option<Arc<[LayoutSeat]>>) -> Result<Arc<AvailabilityView>, Error> {
    let started = Instant::now();
    if let Some(layout) = layout {
        let states = sql::availability::SeatStates { event }.query().fetch_one(pool).await?;
        if states.fit(&layout) {
            return Ok(Arc::new(AvailabilityView::new(event, layout, &states, started, started.elapsed())));
        }
    }
    let started = Instant::now();
    let mut tx = pool.begin_with(sql::availability::BEGIN_ONE_SNAPSHOT).await?;
    let layout = sql::availability::SeatLayout { event }.query().fetch_all(&mut tx).await?;
    let states = sql::availability::SeatStates { event }.query().fetch_one(&mut tx).await?;
    tx.commit().await?;
    Ok(Arc::new(AvailabilityView::new(event, layout.into(), &states, started, started.elapsed())))
}
