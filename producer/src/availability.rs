//! What a storefront shows: per class of an event, how many seats are free
//! and at what prices, and the seat map. Read through
//! `seatq.availability(event)` and `seatq.seat_map(event)`, which the
//! producer role may call; neither names a customer or a booking. A seat
//! whose hold has lapsed counts as free, swept or not.

use serde::{Deserialize, Serialize};

use crate::SeatAvailability;

/// One class of an event: its seats, how they stand, and its prices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClassAvailability {
    pub class: i16,
    /// Seats of the class in all (not for sale ones too).
    pub seats: i64,
    /// Available, or held with the hold lapsed.
    pub free: i64,
    /// Held, the hold not lapsed.
    pub held: i64,
    pub booked: i64,
    /// Cheapest and dearest free seat; absent when none is free.
    pub free_min_cents: Option<i32>,
    pub free_max_cents: Option<i32>,
    /// Cheapest and dearest seat of the class, free or not.
    pub min_cents: i32,
    pub max_cents: i32,
}

/// One seat on an event's map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MapSeat {
    #[sqlx(rename = "seat_no")]
    pub seat: i32,
    /// Where the venue says the seat is ("Circle", row "C", seat "14").
    pub section: String,
    pub row_label: String,
    pub label: String,
    #[sqlx(rename = "row_no")]
    pub row: i32,
    pub pos: i32,
    pub class: i16,
    pub price_cents: i32,
    pub state: SeatAvailability,
}
