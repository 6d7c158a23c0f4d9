//! Taking seats: the all-or-nothing, lock-what-you-can allocation.
//!
//! "Free" always means available, or held with the hold lapsed (passive
//! expiry), so no answer depends on when the sweeper last ran.

/// Does the event exist?
pub const EVENT_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM seatq.events WHERE id = $1)";

/// Lock up to $3 of the cheapest free seats of class $2 on event $1, skipping
/// seats that in-flight transactions hold. An index seek on seats_free_by_price.
pub const LOCK_CHEAPEST: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents
FROM seatq.seats
WHERE event_id = $1 AND class = $2
  AND state <> 'booked' AND (state = 'available' OR held_until <= now())
ORDER BY price_cents, seat_no
LIMIT $3
FOR UPDATE SKIP LOCKED";

/// How many seats of class $2 on event $1 are free by committed state, counted
/// up to $3. More free than locked means others hold locks: contention.
pub const COUNT_FREE: &str = "
SELECT count(*) FROM (
    SELECT 1 FROM seatq.seats
    WHERE event_id = $1 AND class = $2
      AND state <> 'booked' AND (state = 'available' OR held_until <= now())
    LIMIT $3
) free";

/// Lock the seats a customer named, failing at once (55P03) if another
/// transaction holds any of them. Returns whether each is free.
pub const LOCK_NAMED: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents,
       (state = 'available' OR (state = 'held' AND held_until <= now())) AS free
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
ORDER BY seat_no
FOR UPDATE NOWAIT";

/// Up to $4 blocks of $3 adjacent free seats of class $2 in one row, cheapest
/// first, by committed state (locks are taken afterwards, block by block).
pub const ADJACENT_BLOCKS: &str = "
WITH free AS (
    SELECT seat_no, row_no, pos, price_cents,
           pos - row_number() OVER (PARTITION BY row_no ORDER BY pos) AS run
    FROM seatq.seats
    WHERE event_id = $1 AND class = $2
      AND state <> 'booked' AND (state = 'available' OR held_until <= now())
), windows AS (
    SELECT row_no, pos,
           array_agg(seat_no) OVER w AS seats,
           sum(price_cents) OVER w AS total,
           count(*) OVER w AS n
    FROM free
    WINDOW w AS (PARTITION BY row_no, run ORDER BY pos ROWS BETWEEN CURRENT ROW AND $3 - 1 FOLLOWING)
)
SELECT seats FROM windows
WHERE n = $3
ORDER BY total, row_no, pos
LIMIT $4";

/// Lock these seats of event $1 if free, skipping those others hold.
pub const LOCK_FREE_SEATS: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
  AND state <> 'booked' AND (state = 'available' OR held_until <= now())
ORDER BY seat_no
FOR UPDATE SKIP LOCKED";

/// Create the booking and give it the (already locked) seats, in one
/// statement. Binds event, customer, state ('held' | 'booked'), seat numbers,
/// total, hold seconds (NULL for a booking), request id.
/// Returns the booking id, its expiry and how many seats changed.
pub const TAKE_SEATS: &str = "
WITH booking AS (
    INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, held_until, request_id)
    VALUES ($1, $2, $3::text::seatq.booking_state, $4, $5,
            now() + $6::int * interval '1 second', $7)
    RETURNING id, held_until
), taken AS (
    UPDATE seatq.seats s
    SET state = $3::text::seatq.seat_state, booking_id = booking.id, held_until = booking.held_until
    FROM booking
    WHERE s.event_id = $1 AND s.seat_no = ANY($4)
    RETURNING s.seat_no
)
SELECT booking.id, booking.held_until, (SELECT count(*) FROM taken) AS taken FROM booking";
