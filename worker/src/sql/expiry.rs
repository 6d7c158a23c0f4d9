//! Active expiry: the sweeper frees lapsed holds in small batches, skipping
//! rows that workers hold (a skipped seat is still free by passive expiry).

/// Free up to $1 held seats whose hold has lapsed. Returns the count.
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

/// Mark up to $1 lapsed holds expired, announcing each on channel $2
/// (`HOLD_LAPSED_CHANNEL`, the booking id as payload). Returns the count.
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
