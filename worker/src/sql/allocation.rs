//! Taking seats: the all-or-nothing, lock-what-you-can allocation.
//!
//! "Free" always means `seatq.is_free` (migrations/0003_inventory.sql):
//! available, or held with the hold lapsed (passive expiry), so no answer
//! depends on when the sweeper last ran.

/// The sales rules of events $1: why sales refuse now (`seatq.sale_refusal`,
/// NULL when on sale) and the per-customer limit. An event that does not
/// exist has no row.
pub const EVENT_RULES: &str = "
SELECT e.id, seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal, e.per_customer
FROM seatq.events e WHERE e.id = ANY($1)";

/// Live seats each customer has on each event (`seatq.customer_seats`): per
/// customer k, the customer $3[k] of producer $2[k] on event $1[k], and
/// whether this transaction holds that customer's lock (`seatq.customer_lock`, tried, never
/// waited for): without it another batch may be booking for the same
/// customer, and the count (then 0) is not to be trusted. The lock is tried
/// in its own step, before the count. Only asked about events with a
/// per-customer limit.
pub const CUSTOMER_SEATS: &str = "
WITH k AS MATERIALIZED (
    SELECT event_id, producer, customer, ord,
           pg_try_advisory_xact_lock(seatq.customer_lock(event_id, producer, customer)) AS locked
    FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS u(event_id, producer, customer, ord)
)
SELECT ord AS idx, locked, CASE WHEN locked THEN seatq.customer_seats(event_id, producer, customer) ELSE 0 END AS used
FROM k
ORDER BY ord";

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

/// The seats customers named: for every (event $1[k], seat $2[k]) that
/// exists, the seat, whether this transaction now holds its lock (taken with
/// SKIP LOCKED: false means an in-flight transaction holds it), whether it
/// is not for sale, and whether it is free. Freeness is read from the locked
/// row's latest version, so it is only trusted where `locked`.
pub const LOCK_NAMED: &str = "
WITH want AS (
    SELECT DISTINCT event_id, seat_no FROM unnest($1::bigint[], $2::int[]) AS w(event_id, seat_no)
), locked AS MATERIALIZED (
    SELECT s.event_id, s.seat_no, s.state, s.held_until
    FROM seatq.seats s JOIN want w ON s.event_id = w.event_id AND s.seat_no = w.seat_no
    FOR UPDATE OF s SKIP LOCKED
)
SELECT s.event_id AS event, s.seat_no AS seat, s.class, s.row_no AS row, s.pos, s.price_cents,
       s.section, s.row_label, s.label,
       l.seat_no IS NOT NULL AS locked,
       s.state = 'blocked' AS blocked,
       coalesce(seatq.is_free(l.state, l.held_until), false) AS free
FROM want w
JOIN seatq.seats s ON s.event_id = w.event_id AND s.seat_no = w.seat_no
LEFT JOIN locked l ON l.event_id = w.event_id AND l.seat_no = w.seat_no";

/// The runs of adjacent free seats (consecutive positions in one row) of
/// group k, class $2[k] on event $1[k], that could seat a party of $3[k],
/// by committed state: per run, its row and its seats, positions and prices
/// in position order. A group with no such run has one row without a run,
/// saying whether the event has the class at all (`seatq.has_class`: a class
/// it does not have is `unknown_class`, not `no_adjacent_seats`). Locks are
/// taken afterwards, on the seats chosen ([`LOCK_FREE_SEATS`]).
pub const FREE_RUNS: &str = "
SELECT g.ord AS grp, r.row, r.seats, r.positions, r.prices,
       r.row IS NOT NULL OR seatq.has_class(g.event_id, g.class) AS has_class
FROM unnest($1::bigint[], $2::smallint[], $3::int[]) WITH ORDINALITY AS g(event_id, class, party, ord)
LEFT JOIN LATERAL (
    SELECT f.row_no AS row,
           array_agg(f.seat_no ORDER BY f.pos) AS seats,
           array_agg(f.pos ORDER BY f.pos) AS positions,
           array_agg(f.price_cents ORDER BY f.pos) AS prices
    FROM (
        SELECT seat_no, row_no, pos, price_cents, pos - row_number() OVER (PARTITION BY row_no ORDER BY pos) AS run
        FROM seatq.seats
        WHERE event_id = g.event_id AND class = g.class
          AND seatq.is_free(state, held_until)
    ) f
    GROUP BY f.row_no, f.run
    HAVING count(*) >= g.party
) r ON true
ORDER BY g.ord, r.row, r.positions[1]";

/// Lock these seats ($1[k] event, $2[k] seat) where they are free, skipping
/// those in-flight transactions hold; returns the seats locked.
pub const LOCK_FREE_SEATS: &str = "
SELECT s.event_id AS event, s.seat_no AS seat, s.class, s.row_no AS row, s.pos, s.price_cents,
       s.section, s.row_label, s.label
FROM (SELECT DISTINCT event_id, seat_no FROM unnest($1::bigint[], $2::int[]) AS w(event_id, seat_no)) w
JOIN seatq.seats s ON s.event_id = w.event_id AND s.seat_no = w.seat_no
WHERE seatq.is_free(s.state, s.held_until)
FOR UPDATE OF s SKIP LOCKED";

/// Create bookings and give them their (already locked) seats, for many
/// requests in one statement. Per booking: request id, event, customer, state
/// ('held' | 'booked'), total, hold seconds (NULL for a booking), the
/// request's producer (as the batch claimed it), and whether
/// it counts toward its event's per-customer limit (`limited`: the event has
/// one; only those are in `bookings_by_customer`); per seat: request id,
/// event, seat number. A hold never outlives its event's sales:
/// it is cut to the end of its sales, `seatq.sales_end` (a primary-key seek
/// per hold, not a join: a join lets the planner scan every event). Each
/// booking carries its request's producer, read from the request row when
/// the batch claimed it, which alone may see and act on the booking.
/// Returns, per booking, its request, id, expiry and how many seats changed.
///
/// The seats are updated as the per-seat list drives, each a primary-key
/// seek: the list carries each seat's event so that it meets seatq.seats
/// before the bookings. Joined to the bookings first, the planner, which
/// cannot tell how many seats each booking has, overestimates the rows of a
/// big batch several times over and merges them with a scan of every seat
/// of every event instead.
pub const TAKE_SEATS: &str = "
WITH b AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::seatq.booking_state[], $5::bigint[], $6::int[],
                         $10::text[], $11::boolean[])
        AS b(request_id, event_id, customer, state, total_cents, hold_secs, producer, limited)
), s AS (
    SELECT * FROM unnest($7::bigint[], $8::bigint[], $9::int[]) AS s(request_id, event_id, seat_no)
), booking AS (
    INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, held_until, request_id, producer, limited)
    SELECT b.event_id, b.customer, b.state, g.seats, b.total_cents,
           CASE WHEN b.hold_secs IS NOT NULL
                THEN least(now() + b.hold_secs * interval '1 second',
                           (SELECT seatq.sales_end(e.sales_until, e.closed_at) FROM seatq.events e WHERE e.id = b.event_id)) END,
           b.request_id,
           b.producer,
           b.limited
    FROM b
    JOIN (SELECT request_id, array_agg(seat_no ORDER BY seat_no) AS seats FROM s GROUP BY request_id) g
        USING (request_id)
    RETURNING id, request_id, event_id, state, held_until
), taken AS (
    UPDATE seatq.seats t
    SET state = booking.state::text::seatq.seat_state, booking_id = booking.id, held_until = booking.held_until
    FROM s JOIN booking USING (request_id)
    WHERE t.event_id = s.event_id AND t.seat_no = s.seat_no
    RETURNING t.booking_id
)
SELECT booking.request_id, booking.id AS booking, booking.held_until, coalesce(n.taken, 0) AS taken
FROM booking
LEFT JOIN (SELECT booking_id, count(*) AS taken FROM taken GROUP BY booking_id) n ON n.booking_id = booking.id";
