//! Taking seats: the all-or-nothing, lock-what-you-can allocation.
//!
//! "Free" always means `seatq.is_free` (migrations/0003_inventory.sql):
//! available, or held with the hold lapsed (passive expiry), so no answer
//! depends on when the sweeper last ran.

/// Event $1's sales rules for customer $2, if it exists: why sales refuse
/// now (`seatq.sale_refusal`, NULL when on sale), its per-customer limit,
/// and how many live seats the customer has on it (counted only when there
/// is a limit).
pub const EVENT_RULES: &str = "
SELECT seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal, e.per_customer,
       e.per_customer IS NULL OR pg_try_advisory_xact_lock(seatq.customer_lock(e.id, $2)) AS customer_locked,
       CASE WHEN e.per_customer IS NULL THEN 0 ELSE (
           SELECT coalesce(sum(cardinality(b.seats)), 0) FROM seatq.bookings b
           WHERE b.event_id = e.id AND b.customer = $2 AND seatq.is_live(b.state, b.held_until)) END::bigint AS used
FROM seatq.events e WHERE e.id = $1";

/// Live seats each customer has on each event: per pair k, customer $2[k]
/// on event $1[k] (bookings_by_customer), and whether this transaction holds
/// the pair's customer lock (`seatq.customer_lock`, tried, never waited
/// for): without it another batch may be booking for the same customer, and
/// the count is not to be trusted. Only asked about events with a
/// per-customer limit.
pub const CUSTOMER_SEATS: &str = "
WITH k AS MATERIALIZED (
    SELECT event_id, customer, ord, pg_try_advisory_xact_lock(seatq.customer_lock(event_id, customer)) AS locked
    FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS u(event_id, customer, ord)
)
SELECT k.ord AS idx, k.locked, coalesce(sum(cardinality(b.seats)), 0)::bigint AS used
FROM k
LEFT JOIN seatq.bookings b
    ON b.event_id = k.event_id AND b.customer = k.customer AND seatq.is_live(b.state, b.held_until)
GROUP BY k.ord, k.locked
ORDER BY k.ord";

/// Lock the cheapest free seats for many requests at once, one group per
/// (event, class): for group k, up to $3[k] seats of class $2[k] on event
/// $1[k], cheapest first. One row per seat locked, and one with a NULL seat
/// for a group that got none; `known` says whether the event exists,
/// `refusal` why its sales refuse now (then no seat is locked: a one-time
/// filter) and `per_customer` its limit. An index seek on
/// seats_free_by_price per group. The lock clause is the strategy's;
/// `$also` may add a condition on the seek and another way to the seats.
macro_rules! lock_cheapest {
    ($lock:literal) => {
        lock_cheapest!($lock, "")
    };
    ($lock:literal, $also:literal) => {
        concat!(
            "
SELECT g.ord AS grp, e.id IS NOT NULL AS known, r.refusal, e.per_customer,
       s.seat_no AS seat, s.class, s.row_no AS row, s.pos, s.price_cents, s.section, s.row_label, s.label
FROM unnest($1::bigint[], $2::smallint[], $3::int[]) WITH ORDINALITY AS g(event_id, class, need, ord)
LEFT JOIN seatq.events e ON e.id = g.event_id
CROSS JOIN LATERAL (SELECT seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal) r
LEFT JOIN LATERAL (
    SELECT * FROM (
        SELECT seat_no, class, row_no, pos, price_cents, section, row_label, label
        FROM seatq.seats
        WHERE event_id = g.event_id AND class = g.class
          AND seatq.is_free(state, held_until) AND r.refusal IS NULL
        ORDER BY price_cents, seat_no
        LIMIT g.need
        ",
            $lock,
            "
    ) head
    ",
            $also,
            "
) s ON true
ORDER BY g.ord, s.price_cents, s.seat_no"
        )
    };
}

/// The default: lock what you can, skipping seats in-flight transactions hold.
/// A group needing $4 seats or more ([`SPREAD_FROM_NEED`]) starts at a random
/// seat of the cheapest price level (`seatq.lock_cheapest_spread`, in
/// migrations/0004_allocation.sql), so that concurrent batches on one hot
/// event do not all step over each other's seats. (Each condition on
/// `g.need` is a one-time filter: the way not taken is not run.)
pub const LOCK_CHEAPEST: &str = lock_cheapest!(
    "FOR UPDATE SKIP LOCKED",
    "WHERE g.need < $4
    UNION ALL
    SELECT * FROM seatq.lock_cheapest_spread(g.event_id, g.class, g.need)
    WHERE g.need >= $4 AND e.id IS NOT NULL AND r.refusal IS NULL"
);
/// Groups needing this many seats or more take them from a random start (see
/// [`LOCK_CHEAPEST`]): a batch of many parties for one event. Smaller ones keep
/// the single head-first seek; two more probes would cost more than the
/// collisions they avoid.
pub const SPREAD_FROM_NEED: i32 = 32;
/// Run [`LOCK_CHEAPEST`]'s spread function for none of the seats of some
/// (event, class) on sale, so that a new session compiles and plans all of
/// it before its first batch needs it (the worker's warm-up; PL/pgSQL plans
/// a statement when it first runs, and on a sold-out class the function
/// returns after its first); it locks nothing.
pub const WARM_SPREAD: &str = "
SELECT count(*)
FROM (SELECT event_id, class FROM seatq.seats WHERE state = 'available' LIMIT 1) s,
     seatq.lock_cheapest_spread(s.event_id, s.class, 0) l";
/// `--strategy blocking`: wait for locked seats (plain FOR UPDATE).
pub const LOCK_CHEAPEST_WAIT: &str = lock_cheapest!("FOR UPDATE");
/// `--strategy nowait`: fail (55P03) at the first locked seat; retried.
pub const LOCK_CHEAPEST_NOWAIT: &str = lock_cheapest!("FOR UPDATE NOWAIT");
/// `--strategy serializable`: no row locks; SERIALIZABLE isolation detects
/// conflicting allocations (40001) and the batch is retried.
pub const PICK_CHEAPEST: &str = lock_cheapest!("");

/// For each group (as in [`LOCK_CHEAPEST`]), how many of its seats are free by
/// committed state, counted up to the group's need. More free than locked
/// means other transactions hold some: contention, not a sell-out. With none
/// free, whether the event has the class at all (`seatq.has_class`): a
/// class it does not have is `unknown_class`, not `sold_out`.
pub const COUNT_FREE: &str = "
SELECT g.ord AS grp, f.free, f.free > 0 OR seatq.has_class(g.event_id, g.class) AS has_class
FROM unnest($1::bigint[], $2::smallint[], $3::int[]) WITH ORDINALITY AS g(event_id, class, need, ord)
CROSS JOIN LATERAL (
    SELECT count(*) AS free FROM (
        SELECT 1 FROM seatq.seats
        WHERE event_id = g.event_id AND class = g.class
          AND seatq.is_free(state, held_until)
        LIMIT g.need) f
) f";

/// Whether event $1 has any seat of class $2 (`seatq.has_class`).
pub const HAS_CLASS: &str = "SELECT seatq.has_class($1, $2)";

/// Lock the seats a customer named, failing at once (55P03) if another
/// transaction holds any of them. Returns whether each is free.
pub const LOCK_NAMED: &str = "
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents, section, row_label, label,
       state = 'blocked' AS blocked, seatq.is_free(state, held_until) AS free
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
      AND seatq.is_free(state, held_until)
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
SELECT seat_no AS seat, class, row_no AS row, pos, price_cents, section, row_label, label
FROM seatq.seats
WHERE event_id = $1 AND seat_no = ANY($2)
  AND seatq.is_free(state, held_until)
ORDER BY seat_no
FOR UPDATE SKIP LOCKED";

/// Create bookings and give them their (already locked) seats, for many
/// requests in one statement. Per booking: request id, event, customer, state
/// ('held' | 'booked'), total, hold seconds (NULL for a booking); per seat:
/// request id, seat number. A hold never outlives its event's sales: it is
/// cut to the end of its sales, `seatq.sales_end` (a primary-key seek per hold, not a join: a join
/// lets the planner scan every event). Each booking carries its request's
/// producer (another primary-key seek, on the request this batch has
/// claimed), which alone may see and act on it. Returns, per booking, its request, id, expiry and
/// how many seats changed.
pub const TAKE_SEATS: &str = "
WITH b AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::seatq.booking_state[], $5::bigint[], $6::int[])
        AS b(request_id, event_id, customer, state, total_cents, hold_secs)
), s AS (
    SELECT * FROM unnest($7::bigint[], $8::int[]) AS s(request_id, seat_no)
), booking AS (
    INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, held_until, request_id, producer)
    SELECT b.event_id, b.customer, b.state, g.seats, b.total_cents,
           CASE WHEN b.hold_secs IS NOT NULL
                THEN least(now() + b.hold_secs * interval '1 second',
                           (SELECT seatq.sales_end(e.sales_until, e.closed_at) FROM seatq.events e WHERE e.id = b.event_id)) END,
           b.request_id,
           (SELECT r.producer FROM seatq.requests r WHERE r.id = b.request_id)
    FROM b
    JOIN (SELECT request_id, array_agg(seat_no ORDER BY seat_no) AS seats FROM s GROUP BY request_id) g
        USING (request_id)
    RETURNING id, request_id, event_id, state, held_until
), taken AS (
    UPDATE seatq.seats t
    SET state = booking.state::text::seatq.seat_state, booking_id = booking.id, held_until = booking.held_until
    FROM booking JOIN s USING (request_id)
    WHERE t.event_id = booking.event_id AND t.seat_no = s.seat_no
    RETURNING t.booking_id
)
SELECT booking.request_id, booking.id AS booking, booking.held_until, coalesce(n.taken, 0) AS taken
FROM booking
LEFT JOIN (SELECT booking_id, count(*) AS taken FROM taken GROUP BY booking_id) n ON n.booking_id = booking.id";
