//! Active expiry: the sweeper frees lapsed holds in small batches, skipping
//! rows that workers hold (a skipped seat is still free by passive expiry).
//!
//! Each statement's params struct is beside it (see [`crate::sql`]).

use super::Scalars;

/// Free up to a sweep's worth of held seats whose hold has lapsed
/// ([`SweepSeats`]). Returns the count.
pub const SWEEP_SEATS: &str = "
WITH lapsed AS (
    SELECT event_id, seat_no FROM seatq.seats
    WHERE seatq.is_lapsed(state, held_until)
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), freed AS (
    UPDATE seatq.seats s SET state = 'available', booking_id = NULL, held_until = NULL
    FROM lapsed
    WHERE s.event_id = lapsed.event_id AND s.seat_no = lapsed.seat_no
    RETURNING 1
)
SELECT count(*) FROM freed";

/// The parameters of [`SWEEP_SEATS`].
#[derive(Debug, Clone, Copy)]
pub struct SweepSeats {
    /// Free at most this many seats.
    pub limit: i64,
}

impl SweepSeats {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(SWEEP_SEATS).bind(self.limit)
    }
}

/// Mark up to a sweep's worth of lapsed holds expired ([`SweepBookings`]),
/// announcing each (the booking id as payload). Returns the count.
/// The notifications are queued in the sweep's transaction, so they are
/// delivered when it commits and never for a sweep that rolls back.
pub const SWEEP_BOOKINGS: &str = "
WITH lapsed AS (
    SELECT id FROM seatq.bookings
    WHERE seatq.is_lapsed(state, held_until)
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
), expired AS (
    UPDATE seatq.bookings b SET state = 'expired', updated_at = now()
    FROM lapsed
    WHERE b.id = lapsed.id
    RETURNING b.id
)
SELECT count(*) FROM expired, pg_notify($2, expired.id::text)";

/// The parameters of [`SWEEP_BOOKINGS`].
#[derive(Debug, Clone, Copy)]
pub struct SweepBookings<'a> {
    /// Expire at most this many holds,
    pub limit: i64,
    /// announcing each on this channel: `seatq_core::sql::notify::HOLD_LAPSED_CHANNEL`.
    pub channel: &'a str,
}

impl<'a> SweepBookings<'a> {
    pub fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(SWEEP_BOOKINGS).bind(self.limit).bind(self.channel)
    }
}
