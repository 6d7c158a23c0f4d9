//! What a storefront shows: per class of an event, and its seat map (or the
//! map in two parts, layout and states), exact or, for a page view, from the
//! client's cache ([`crate::view_cache`]). A producer login may call each.

use std::sync::Arc;

use super::Client;
use crate::Error;
use crate::availability::{AvailabilityView, ClassAvailability, LayoutSeat, MapSeat, SeatStates};
use crate::sql::availability as sql;
use crate::view_cache::ViewCacheStats;

/// The storefront: availability and seat maps. Each is read from the
/// client's read replica if it has one ([`Client::with_reads_from`]): then
/// "now" is as far as that standby has replayed.
impl Client {
    /// Per class of an event: seats, free, held and booked, and the price
    /// ranges of the free seats and of all, exact (read now; for a page view,
    /// [`Client::cached_availability`]). Empty for an event without seats. A
    /// producer login may call it.
    pub async fn availability(&self, event: i64) -> Result<Vec<ClassAvailability>, Error> {
        Ok(sql::Availability { event }.query().fetch_all(self.reads()).await?)
    }

    /// Every seat of an event, in seat order, free, held, booked or not for
    /// sale (never whose), exact (read now; for a page view,
    /// [`Client::cached_availability`]). Empty for an event without seats. A
    /// producer login may call it.
    pub async fn seat_map(&self, event: i64) -> Result<Vec<MapSeat>, Error> {
        Ok(sql::SeatMap { event }.query().fetch_all(self.reads()).await?)
    }

    /// The layout of an event's seats (where each is and what it costs), in
    /// seat order: the part of [`Client::seat_map`] that never changes once
    /// the seats are made. Empty for an event without seats. A producer
    /// login may call it.
    pub async fn seat_layout(&self, event: i64) -> Result<Vec<LayoutSeat>, Error> {
        Ok(sql::SeatLayout { event }.query().fetch_all(self.reads()).await?)
    }

    /// How an event's seats stand now, compactly: the seats held, booked
    /// and not for sale (every other seat is free). With
    /// [`Client::seat_layout`], the whole map. A producer login may call it.
    pub async fn seat_states(&self, event: i64) -> Result<SeatStates, Error> {
        Ok(sql::SeatStates { event }.query().fetch_one(self.reads()).await?)
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
        self.views.get(self.reads(), event).await
    }

    /// What this client's cache of availability has done so far.
    pub fn view_cache_stats(&self) -> ViewCacheStats {
        self.views.stats()
    }
}
