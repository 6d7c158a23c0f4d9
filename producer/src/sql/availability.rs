//! What a storefront reads: free seats and prices per class, and the seat
//! map, through the functions of `migrations/0007_availability.sql` (which
//! the producer role may execute; it may not read the seats themselves).
//!
//! Each statement's params struct is beside it; its rows are
//! [`crate::availability`]'s types (see [`crate::sql`]).

use super::Rows;
use crate::availability::{self, ClassAvailability, LayoutSeat, MapSeat};

/// Per class of event $1 ([`Availability`]): seats, free, held, booked, and the price ranges.
pub(crate) const AVAILABILITY: &str = "
SELECT class, seats, free, held, booked, free_min_cents, free_max_cents, min_cents, max_cents
FROM seatq.availability($1)";

/// The parameters of [`AVAILABILITY`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Availability {
    pub(crate) event: i64,
}

impl Availability {
    pub(crate) fn query(&self) -> Rows<'static, ClassAvailability> {
        sqlx::query_as(AVAILABILITY).bind(self.event)
    }
}

/// Every seat of event $1 ([`SeatMap`]), in seat order, and how it shows.
pub(crate) const SEAT_MAP: &str = "
SELECT seat_no, section, row_label, label, row_no, pos, class, price_cents, state
FROM seatq.seat_map($1)";

/// The parameters of [`SEAT_MAP`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatMap {
    pub(crate) event: i64,
}

impl SeatMap {
    pub(crate) fn query(&self) -> Rows<'static, MapSeat> {
        sqlx::query_as(SEAT_MAP).bind(self.event)
    }
}

/// The layout of event $1's seats ([`SeatLayout`]), in seat order: what never changes.
pub(crate) const SEAT_LAYOUT: &str = "
SELECT seat_no, section, row_label, label, row_no, pos, class, price_cents
FROM seatq.seat_layout($1)";

/// The parameters of [`SEAT_LAYOUT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatLayout {
    pub(crate) event: i64,
}

impl SeatLayout {
    pub(crate) fn query(&self) -> Rows<'static, LayoutSeat> {
        sqlx::query_as(SEAT_LAYOUT).bind(self.event)
    }
}

/// How event $1's seats stand ([`SeatStates`]), in one row
/// ([`availability::SeatStates`]): how many there are, and those held, booked
/// and not for sale (every other seat is free).
pub(crate) const SEAT_STATES: &str = "SELECT seats, held, booked, not_for_sale FROM seatq.seat_states($1)";

/// The parameters of [`SEAT_STATES`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatStates {
    pub(crate) event: i64,
}

impl SeatStates {
    pub(crate) fn query(&self) -> Rows<'static, availability::SeatStates> {
        sqlx::query_as(SEAT_STATES).bind(self.event)
    }
}

/// A read-only transaction with one snapshot for all its statements: the
/// layout and the states read together agree. How a transaction begins, not
/// a statement bound: it has no params struct.
pub(crate) const BEGIN_ONE_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
