//! Confirming and cancelling bookings: owner-checked, never waiting on a lock.

/// Lock a booking, failing at once (55P03) if another transaction holds it.
pub const LOCK_BOOKING: &str = "
SELECT id, event_id, customer, state::text AS state, seats, total_cents, held_until,
       (state = 'held' AND held_until <= now()) AS lapsed
FROM seatq.bookings
WHERE id = $1
FOR NO KEY UPDATE NOWAIT";

/// Lock the seats a booking still owns in state $2, failing at once if held.
pub const LOCK_BOOKING_SEATS: &str = "
SELECT seat_no FROM seatq.seats
WHERE booking_id = $1 AND state = $2::text::seatq.seat_state
FOR UPDATE NOWAIT";

/// Turn a live hold into a booking.
pub const CONFIRM: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'booked', held_until = NULL
    WHERE booking_id = $1 AND state = 'held'
)
UPDATE seatq.bookings SET state = 'booked', held_until = NULL, updated_at = now()
WHERE id = $1";

/// Give a booking's seats back and mark it cancelled.
pub const CANCEL: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'available', booking_id = NULL, held_until = NULL
    WHERE booking_id = $1
)
UPDATE seatq.bookings SET state = 'cancelled', held_until = NULL, updated_at = now()
WHERE id = $1";

/// Seat details for a result.
pub const SEAT_DETAILS: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
ORDER BY seat_no";
