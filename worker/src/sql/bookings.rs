//! Confirming, cancelling and extending bookings: owner-checked, never
//! waiting on a lock.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use chrono::{DateTime, Utc};
use seatq_core::outcome::{BookingState, SeatInfo, SeatState};

use seatq_core::sql::route::{BindRoute as _, Routable};

use super::{Effect, Rows};

/// Lock a booking for a request ([`LockBooking`]), failing at once (55P03)
/// if another transaction holds it. Only a booking of the request's producer is found
/// (`seatq.bookings.producer`, migrations/0006_roles.sql), unless that
/// producer sees every producer's (`seatq.sees_every_producer`: an admin, a
/// superuser): to a producer, another's booking does not exist, and it is
/// neither locked nor waited for. The worker sees every row itself, so the
/// check is here rather than in row-level security.
pub const LOCK_BOOKING: &str = "
WITH asking AS (SELECT producer FROM seatq.requests WHERE id = $2 /*route event_id*/)
SELECT b.id, b.event_id, b.customer, b.state, b.seats, b.total_cents, b.held_until,
       seatq.is_lapsed(b.state, b.held_until) AS lapsed, b.token_hash
FROM seatq.bookings b, asking
WHERE b.id = $1 /*route b.event_id*/
  AND (b.producer = asking.producer OR seatq.sees_every_producer(asking.producer))
FOR NO KEY UPDATE OF b NOWAIT";
static ROUTED_LOCK_BOOKING: Routable = Routable::new(LOCK_BOOKING);

/// The parameters of [`LOCK_BOOKING`].
#[derive(Debug, Clone, Copy)]
pub struct LockBooking {
    /// The booking's id.
    pub booking: i64,
    /// The request asking: its producer must own the booking.
    pub request: i64,
    /// The event of both, on a database sharded by event
    /// ([`seatq_core::sql::route`]).
    pub route: Option<i64>,
}

impl LockBooking {
    pub fn query(&self) -> Rows<'static, Booking> {
        sqlx::query_as(ROUTED_LOCK_BOOKING.text(self.route)).bind(self.booking).bind(self.request).route(self.route)
    }
}

/// A booking, as [`LOCK_BOOKING`] loaded and locked it.
#[derive(Debug, sqlx::FromRow)]
pub struct Booking {
    pub id: i64,
    #[sqlx(rename = "event_id")]
    pub event: i64,
    pub customer: String,
    pub state: BookingState,
    pub seats: Vec<i32>,
    pub total_cents: i64,
    pub held_until: Option<DateTime<Utc>>,
    /// A hold whose time is up (`seatq.is_lapsed`), swept or not.
    pub lapsed: bool,
    /// The SHA-256 of the hold token it answers to (none: it answers to its
    /// customer's name).
    pub token_hash: Option<Vec<u8>>,
}

/// Lock the seats a booking lists ([`LockBookingSeats`]), failing at once
/// (55P03) if another transaction holds one; `owned` says whether the booking
/// still owns each in the state given. Seats are found by primary key only: a
/// condition on `state` here would let a planner with stale statistics pick
/// the small partial index on held seats and filter every hold on the server,
/// a cost that grows with the number of holds.
pub const LOCK_BOOKING_SEATS: &str = "
SELECT seat_no, (booking_id IS NOT DISTINCT FROM $1 AND state = $4) AS owned
FROM seatq.seats
WHERE event_id = $2 AND seat_no = ANY($3)
FOR UPDATE NOWAIT";

/// The parameters of [`LOCK_BOOKING_SEATS`].
#[derive(Debug, Clone, Copy)]
pub struct LockBookingSeats<'a> {
    pub booking: i64,
    /// The booking's event,
    pub event: i64,
    /// and the seats it lists.
    pub seats: &'a [i32],
    /// The state the booking's seats are in while it owns them.
    pub state: SeatState,
}

impl<'a> LockBookingSeats<'a> {
    pub fn query(&self) -> Rows<'a, BookingSeat> {
        sqlx::query_as(LOCK_BOOKING_SEATS).bind(self.booking).bind(self.event).bind(self.seats).bind(self.state)
    }
}

/// A row of [`LOCK_BOOKING_SEATS`]: a seat locked.
#[derive(Debug, sqlx::FromRow)]
pub struct BookingSeat {
    pub seat_no: i32,
    /// The booking still owns it, in the state asked about.
    pub owned: bool,
}

/// Turn a live hold ([`Confirm`]) into a booking. Its seats are locked and
/// known to be held by it ([`LOCK_BOOKING_SEATS`]), so they are found by
/// primary key alone (see there).
pub const CONFIRM: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'booked', held_until = NULL
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1
)
UPDATE seatq.bookings SET state = 'booked', held_until = NULL, updated_at = now()
WHERE id = $1 AND event_id = $2";

/// The parameters of [`CONFIRM`].
#[derive(Debug, Clone, Copy)]
pub struct Confirm<'a> {
    pub booking: i64,
    /// The booking's event,
    pub event: i64,
    /// and the seats it lists.
    pub seats: &'a [i32],
}

impl<'a> Confirm<'a> {
    pub fn query(&self) -> Effect<'a> {
        sqlx::query(CONFIRM).bind(self.booking).bind(self.event).bind(self.seats)
    }
}

/// Give the seats of a booking ([`Cancel`]) back and mark it cancelled.
pub const CANCEL: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'available', booking_id = NULL, held_until = NULL
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1
)
UPDATE seatq.bookings SET state = 'cancelled', held_until = NULL, updated_at = now()
WHERE id = $1 AND event_id = $2";

/// The parameters of [`CANCEL`].
#[derive(Debug, Clone, Copy)]
pub struct Cancel<'a> {
    pub booking: i64,
    /// The booking's event,
    pub event: i64,
    /// and the seats it lists.
    pub seats: &'a [i32],
}

impl<'a> Cancel<'a> {
    pub fn query(&self) -> Effect<'a> {
        sqlx::query(CANCEL).bind(self.booking).bind(self.event).bind(self.seats)
    }
}

/// Lengthen a live hold ([`Extend`]) to `hold_secs` from now, booking and
/// seats together; returns the new `held_until` and whether the limit cut
/// the extension short ([`Extended`]). Its seats are locked and known to be
/// held by it ([`LOCK_BOOKING_SEATS`]), so they are found by primary key alone.
///
/// The rule: held until `least(now() + hold_secs, created_at + max_hold_secs)`,
/// where `max_hold_secs` is the longest a hold may last
/// (`limits::MAX_HOLD_SECONDS`) and `created_at` when the hold was made, so
/// extending again and again never
/// keeps seats past that; and never earlier than it already was (`greatest`
/// with the current `held_until`), so an extension never shortens a hold.
/// Nor past the end of the event's sales (`seatq.sales_end`: `sales_until`,
/// or its closing): the limit is whichever comes first.
pub const EXTEND: &str = "
WITH target AS (
    SELECT greatest(held_until, least(now() + make_interval(secs => $4), limit_at)) AS until,
           now() + make_interval(secs => $4) > limit_at AS capped
    FROM (SELECT b.held_until,
                 least(seatq.secs_after(b.created_at, $5), seatq.sales_end(e.sales_until, e.closed_at)) AS limit_at
          FROM seatq.bookings b LEFT JOIN seatq.events e ON e.id = b.event_id WHERE b.id = $1 AND b.event_id = $2) b
), seats AS (
    UPDATE seatq.seats SET held_until = target.until
    FROM target
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1
)
UPDATE seatq.bookings SET held_until = target.until, updated_at = now()
FROM target
WHERE id = $1 AND event_id = $2
RETURNING target.until, target.capped";

/// The parameters of [`EXTEND`].
#[derive(Debug, Clone, Copy)]
pub struct Extend<'a> {
    pub booking: i64,
    /// The booking's event,
    pub event: i64,
    /// and the seats it lists.
    pub seats: &'a [i32],
    /// Hold for this long from now.
    pub hold_secs: f64,
    /// The longest a hold may last from when it was made.
    pub max_hold_secs: f64,
}

impl<'a> Extend<'a> {
    pub fn query(&self) -> Rows<'a, Extended> {
        sqlx::query_as(EXTEND)
            .bind(self.booking)
            .bind(self.event)
            .bind(self.seats)
            .bind(self.hold_secs)
            .bind(self.max_hold_secs)
    }
}

/// The row of [`EXTEND`].
#[derive(Debug, sqlx::FromRow)]
pub struct Extended {
    /// The hold's new end.
    pub until: DateTime<Utc>,
    /// The limit cut the extension short.
    pub capped: bool,
}

/// Seat details for a result ([`SeatDetails`]), in seat-number order.
pub const SEAT_DETAILS: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents, section, row_label, label
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
ORDER BY seat_no";

/// The parameters of [`SEAT_DETAILS`].
#[derive(Debug, Clone, Copy)]
pub struct SeatDetails<'a> {
    pub event: i64,
    /// Seat numbers.
    pub seats: &'a [i32],
}

impl<'a> SeatDetails<'a> {
    pub fn query(&self) -> Rows<'a, SeatInfo> {
        sqlx::query_as(SEAT_DETAILS).bind(self.event).bind(self.seats)
    }
}
