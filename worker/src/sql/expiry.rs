//! Active expiry: the sweeper frees lapsed holds in small batches, skipping
//! rows that workers hold (a skipped seat is still free by passive expiry).
//!
//! Each statement's params struct is beside it (see [`crate::sql`]).

use seatq_core::sql::route::{BindRoute as _, Routable};

use super::Scalars;

/// Free up to a sweep's worth of held seats whose hold has lapsed
/// ([`SweepSeats`]). Returns the count.
pub const SWEEP_SEATS: &str = "
WITH lapsed AS (
    SELECT event_id, seat_no FROM seatq.seats
    WHERE seatq.is_lapsed(state, held_until) /*route event_id*/
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), freed AS (
    UPDATE seatq.seats s SET state = 'available', booking_id = NULL, held_until = NULL
    FROM lapsed
    WHERE s.event_id = lapsed.event_id AND s.seat_no = lapsed.seat_no /*route s.event_id*/
    RETURNING 1
)
SELECT count(*) FROM freed";
static ROUTED_SWEEP_SEATS: Routable = Routable::new(SWEEP_SEATS);

/// The parameters of [`SWEEP_SEATS`].
#[derive(Debug, Clone, Copy)]
pub struct SweepSeats {
    /// Free at most this many seats,
    pub limit: i64,
    /// of this event alone, on a database sharded by event
    /// ([`seatq_core::sql::route`]).
    pub route: Option<i64>,
}

impl SweepSeats {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(ROUTED_SWEEP_SEATS.text(self.route)).bind(self.limit).route(self.route)
    }
}

/// Mark up to a sweep's worth of lapsed holds expired ([`SweepBookings`]);
/// returns their ids, for the sweep to announce ([`super::claim::NOTIFY_DONE`]
/// on `HOLD_LAPSED_CHANNEL`) in its transaction. (Announced by a statement of
/// their own: on Citus this one runs on a worker node, whose notifications
/// no listener hears.)
pub const SWEEP_BOOKINGS: &str = "
WITH lapsed AS (
    SELECT event_id, id FROM seatq.bookings
    WHERE seatq.is_lapsed(state, held_until) /*route event_id*/
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
), expired AS (
    UPDATE seatq.bookings b SET state = 'expired', updated_at = now()
    FROM lapsed
    WHERE b.event_id = lapsed.event_id AND b.id = lapsed.id /*route b.event_id*/
    RETURNING b.id
)
SELECT id FROM expired";
static ROUTED_SWEEP_BOOKINGS: Routable = Routable::new(SWEEP_BOOKINGS);

/// The parameters of [`SWEEP_BOOKINGS`].
#[derive(Debug, Clone, Copy)]
pub struct SweepBookings {
    /// Expire at most this many holds,
    pub limit: i64,
    /// of this event alone, as [`SweepSeats::route`].
    pub route: Option<i64>,
}

impl SweepBookings {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(ROUTED_SWEEP_BOOKINGS.text(self.route)).bind(self.limit).route(self.route)
    }
}

/// The events with lapsed seats not yet swept (at most 1,000 a pass), on a
/// database sharded by event, where a sweep is routed to one event at a
/// time; [`EVENTS_WITH_LAPSED_BOOKINGS`] the same of holds. A read over
/// every shard, without locks (two, not a UNION: Citus runs a UNION over
/// shards as a transaction on every node).
pub const EVENTS_WITH_LAPSED_SEATS: &str =
    "SELECT DISTINCT event_id FROM seatq.seats WHERE seatq.is_lapsed(state, held_until) LIMIT 1000";

/// See [`EVENTS_WITH_LAPSED_SEATS`].
pub const EVENTS_WITH_LAPSED_BOOKINGS: &str =
    "SELECT DISTINCT event_id FROM seatq.bookings WHERE seatq.is_lapsed(state, held_until) LIMIT 1000";

/// The parameters of [`EVENTS_WITH_LAPSED_SEATS`] and
/// [`EVENTS_WITH_LAPSED_BOOKINGS`]: which of the two.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventsWithLapsedHolds {
    /// Of bookings, not seats.
    pub bookings: bool,
}

impl EventsWithLapsedHolds {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(if self.bookings { EVENTS_WITH_LAPSED_BOOKINGS } else { EVENTS_WITH_LAPSED_SEATS })
    }
}
