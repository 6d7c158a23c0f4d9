//! Confirming and cancelling bookings: owner-checked, never waiting on a lock.

/// Lock a booking, failing at once (55P03) if another transaction holds it.
pub const LOCK_BOOKING: &str = "
SELECT id, event_id, customer, state::text AS state, seats, total_cents, held_until,
       (state = 'held' AND held_until <= now()) AS lapsed
FROM seatq.bookings
WHERE id = $1
FOR NO KEY UPDATE NOWAIT";

/// Lock the seats booking $1 (of event $2, listing seats $3) still owns in
/// state $4, failing at once if another transaction holds one. Seats are
/// found by the booking's list (primary key), so no index on booking_id is
/// needed: one fewer index to update for every seat taken.
pub const LOCK_BOOKING_SEATS: &str = "
SELECT seat_no FROM seatq.seats
WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1 AND state = $4::text::seatq.seat_state
FOR UPDATE NOWAIT";

/// Turn live hold $1 (of event $2, listing seats $3) into a booking.
pub const CONFIRM: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'booked', held_until = NULL
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1 AND state = 'held'
)
UPDATE seatq.bookings SET state = 'booked', held_until = NULL, updated_at = now()
WHERE id = $1";

/// Give the seats of booking $1 (of event $2, listing seats $3) back and
/// mark it cancelled.
pub const CANCEL: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'available', booking_id = NULL, held_until = NULL
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1
)
UPDATE seatq.bookings SET state = 'cancelled', held_until = NULL, updated_at = now()
WHERE id = $1";

/// Seat details for a result.
pub const SEAT_DETAILS: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
ORDER BY seat_no";
