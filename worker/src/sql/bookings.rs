//! Confirming, cancelling and extending bookings: owner-checked, never
//! waiting on a lock.

/// Lock booking $1 for request $2, failing at once (55P03) if another
/// transaction holds it. Only a booking of the request's producer is found
/// (`seatq.bookings.producer`, migrations/0006_roles.sql), unless that
/// producer sees every producer's (`seatq.sees_every_producer`: an admin, a
/// superuser): to a producer, another's booking does not exist, and it is
/// neither locked nor waited for. The worker sees every row itself, so the
/// check is here rather than in row-level security.
pub const LOCK_BOOKING: &str = "
WITH asking AS (SELECT producer FROM seatq.requests WHERE id = $2)
SELECT b.id, b.event_id, b.customer, b.state, b.seats, b.total_cents, b.held_until,
       seatq.is_lapsed(b.state, b.held_until) AS lapsed
FROM seatq.bookings b, asking
WHERE b.id = $1
  AND (b.producer = asking.producer OR seatq.sees_every_producer(asking.producer))
FOR NO KEY UPDATE OF b NOWAIT";

/// Lock the seats booking $1 (of event $2) lists ($3), failing at once
/// (55P03) if another transaction holds one; `owned` says whether the booking
/// still owns each in state $4. Seats are found by primary key only: a
/// condition on `state` here would let a planner with stale statistics pick
/// the small partial index on held seats and filter every hold on the server,
/// a cost that grows with the number of holds.
pub const LOCK_BOOKING_SEATS: &str = "
SELECT seat_no, (booking_id IS NOT DISTINCT FROM $1 AND state = $4) AS owned
FROM seatq.seats
WHERE event_id = $2 AND seat_no = ANY($3)
FOR UPDATE NOWAIT";

/// Turn live hold $1 (of event $2, listing seats $3) into a booking. Its
/// seats are locked and known to be held by it (LOCK_BOOKING_SEATS), so they
/// are found by primary key alone (see there).
pub const CONFIRM: &str = "
WITH seats AS (
    UPDATE seatq.seats SET state = 'booked', held_until = NULL
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1
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

/// Lengthen live hold $1 (of event $2, listing seats $3) to $4 seconds from
/// now, booking and seats together; returns the new `held_until` and whether
/// the limit cut the extension short. Its seats are locked and known to be
/// held by it (LOCK_BOOKING_SEATS), so they are found by primary key alone.
///
/// The rule: held until `least(now() + $4 s, created_at + $5 s)`, where $5
/// is the longest a hold may last (`limits::MAX_HOLD_SECONDS`) and
/// `created_at` when the hold was made, so extending again and again never
/// keeps seats past that; and never earlier than it already was (`greatest`
/// with the current `held_until`), so an extension never shortens a hold.
/// Nor past the end of the event's sales (`seatq.sales_end`: `sales_until`,
/// or its closing): the limit is whichever comes first.
pub const EXTEND: &str = "
WITH target AS (
    SELECT greatest(held_until, least(now() + make_interval(secs => $4), limit_at)) AS until,
           now() + make_interval(secs => $4) > limit_at AS capped
    FROM (SELECT b.held_until,
                 least(b.created_at + make_interval(secs => $5), seatq.sales_end(e.sales_until, e.closed_at)) AS limit_at
          FROM seatq.bookings b LEFT JOIN seatq.events e ON e.id = b.event_id WHERE b.id = $1) b
), seats AS (
    UPDATE seatq.seats SET held_until = target.until
    FROM target
    WHERE event_id = $2 AND seat_no = ANY($3) AND booking_id = $1
)
UPDATE seatq.bookings SET held_until = target.until, updated_at = now()
FROM target
WHERE id = $1
RETURNING target.until, target.capped";

/// Seat details for a result.
pub const SEAT_DETAILS: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents, section, row_label, label
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
ORDER BY seat_no";
