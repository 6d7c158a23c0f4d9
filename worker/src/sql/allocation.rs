//! Taking seats: the all-or-nothing, lock-what-you-can allocation.
//!
//! "Free" always means `seatq.is_free` (migrations/0003_inventory.sql):
//! available, or held with the hold lapsed (passive expiry), so no answer
//! depends on when the sweeper last ran.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use chrono::{DateTime, Utc};
use seatq_core::outcome::{BookingState, SeatInfo, SeatState};

use seatq_core::sql::route::{BindRoute as _, Routable};

use super::{Rows, Scalars};
use crate::Strategy;

/// The sales rules of some events ([`EventRules`]): why sales refuse now
/// (`seatq.sale_refusal`, NULL when on sale) and the per-customer limit. An
/// event that does not exist has no row.
pub const EVENT_RULES: &str = "
SELECT e.id, seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal, e.per_customer
FROM seatq.events e WHERE e.id = ANY($1)";

/// The parameters of [`EVENT_RULES`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EventRules<'a> {
    /// The events asked about.
    pub events: &'a [i64],
}

impl<'a> EventRules<'a> {
    pub fn query(&self) -> Rows<'a, SalesRules> {
        sqlx::query_as(EVENT_RULES).bind(self.events)
    }
}

/// A row of [`EVENT_RULES`]: one event's sales rules.
#[derive(Debug, sqlx::FromRow)]
pub struct SalesRules {
    pub id: i64,
    /// Why sales refuse now (`seatq.sale_refusal`'s code); `None` while on sale.
    pub refusal: Option<String>,
    /// Most live seats one customer may have on the event; `None`: no limit.
    pub per_customer: Option<i32>,
}

/// The classes of some events that have a waiting list ([`LinedClasses`]):
/// their free seats are the list's (migrations/0012_waiting_list.sql).
/// Asked for the events that named and side-by-side requests ask about
/// (cheapest-first groups learn it from [`LOCK_CHEAPEST`]).
pub const LINED_CLASSES: &str = "
SELECT DISTINCT event_id, class FROM seatq.waiting WHERE event_id = ANY($1) /*route event_id*/";
static ROUTED_LINED_CLASSES: Routable = Routable::new(LINED_CLASSES);

/// The parameters of [`LINED_CLASSES`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LinedClasses<'a> {
    /// The events asked about,
    pub events: &'a [i64],
    /// all this one, on a database sharded by event ([`seatq_core::sql::route`]).
    pub route: Option<i64>,
}

impl<'a> LinedClasses<'a> {
    pub fn query(&self) -> Rows<'a, (i64, i16)> {
        sqlx::query_as(ROUTED_LINED_CLASSES.text(self.route)).bind(self.events).route(self.route)
    }
}

/// Live seats each customer of [`CustomerSeats`] (in normal form) has on its event
/// (`seatq.customer_seats`), and whether this transaction holds that
/// customer's lock (`seatq.customer_lock`, tried, never waited for): without
/// it another batch may be booking for the same customer, and the count
/// (then 0) is not to be trusted. The lock is tried in its own step, before
/// the count. Only asked about events with a per-customer limit.
pub const CUSTOMER_SEATS: &str = "
WITH k AS MATERIALIZED (
    SELECT event_id, producer, customer, ord,
           pg_try_advisory_xact_lock(seatq.customer_lock(event_id, producer, customer)) AS locked
    FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS u(event_id, producer, customer, ord)
)
SELECT ord AS idx, locked, CASE WHEN locked THEN seatq.customer_seats(event_id, producer, customer) ELSE 0 END AS used
FROM k
ORDER BY ord";

/// The parameters of [`CUSTOMER_SEATS`]: customer k is `customers[k]` of
/// `producers[k]` on `events[k]` (customer names are each producer's own).
#[derive(Debug, Clone, Copy, Default)]
pub struct CustomerSeats<'a> {
    pub events: &'a [i64],
    pub producers: &'a [&'a str],
    pub customers: &'a [&'a str],
}

impl<'a> CustomerSeats<'a> {
    pub fn query(&self) -> Rows<'a, CustomerCount> {
        sqlx::query_as(CUSTOMER_SEATS).bind(self.events).bind(self.producers).bind(self.customers)
    }
}

/// A row of [`CUSTOMER_SEATS`]: one customer's live seats on an event.
#[derive(Debug, sqlx::FromRow)]
pub struct CustomerCount {
    /// Which customer of [`CustomerSeats`], from 1.
    pub idx: i64,
    /// This transaction holds the customer's lock; `used` is only trusted if so.
    pub locked: bool,
    /// Live seats the customer has on the event (0 where not `locked`).
    pub used: i64,
}

/// Lock the cheapest free seats for many requests at once, one group per
/// (event, class) of [`LockCheapest`]: up to its `need` seats of its class on
/// its event, cheapest first. One row per seat locked, and one with a NULL seat
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
SELECT g.ord AS grp, e.id IS NOT NULL AS known, r.refusal, e.per_customer, l.lined,
       s.seat_no AS seat, s.class, s.row_no AS row, s.pos, s.price_cents, s.section, s.row_label, s.label
FROM unnest($1::bigint[], $2::smallint[], $3::int[]) WITH ORDINALITY AS g(event_id, class, need, ord)
LEFT JOIN seatq.events e ON e.id = g.event_id
CROSS JOIN LATERAL (SELECT seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal) r
CROSS JOIN LATERAL (
    SELECT EXISTS (SELECT 1 FROM seatq.waiting w WHERE w.event_id = g.event_id AND w.class = g.class /*route w.event_id*/)
        AS lined
) l
LEFT JOIN LATERAL (
    SELECT * FROM (
        SELECT seat_no, class, row_no, pos, price_cents, section, row_label, label
        FROM seatq.seats
        WHERE event_id = g.event_id AND class = g.class
          AND seatq.is_free(state, held_until) AND r.refusal IS NULL AND NOT l.lined /*route event_id*/
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
/// A group needing [`SPREAD_FROM_NEED`] seats or more (bound by
/// [`LockCheapest::query`] for this text alone) starts at a random
/// seat of the cheapest price level (`seatq.lock_cheapest_spread`, in
/// migrations/0004_allocation.sql), so that concurrent batches on one hot
/// event do not all step over each other's seats. (Each condition on
/// `g.need` is a one-time filter: the way not taken is not run.)
pub const LOCK_CHEAPEST: &str = lock_cheapest!(
    "FOR UPDATE SKIP LOCKED",
    "WHERE g.need < $4
    UNION ALL
    SELECT * FROM seatq.lock_cheapest_spread(g.event_id, g.class, g.need)
    WHERE g.need >= $4 AND e.id IS NOT NULL AND r.refusal IS NULL AND NOT l.lined"
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
static ROUTED_LOCK_CHEAPEST: Routable = Routable::new(LOCK_CHEAPEST);
static ROUTED_LOCK_CHEAPEST_WAIT: Routable = Routable::new(LOCK_CHEAPEST_WAIT);
static ROUTED_LOCK_CHEAPEST_NOWAIT: Routable = Routable::new(LOCK_CHEAPEST_NOWAIT);
static ROUTED_PICK_CHEAPEST: Routable = Routable::new(PICK_CHEAPEST);

/// The parameters of [`LOCK_CHEAPEST`] and of its strategies' variants
/// ([`LOCK_CHEAPEST_WAIT`], [`LOCK_CHEAPEST_NOWAIT`], [`PICK_CHEAPEST`]):
/// group k is class `classes[k]` of event `events[k]`, `need[k]` seats.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockCheapest<'a> {
    /// Which of the four texts runs.
    pub strategy: Strategy,
    pub events: &'a [i64],
    pub classes: &'a [i16],
    /// Most seats to lock.
    pub need: &'a [i32],
    /// The one event of every group, on a database sharded by event
    /// ([`seatq_core::sql::route`]).
    pub route: Option<i64>,
}

impl<'a> LockCheapest<'a> {
    pub fn query(&self) -> Rows<'a, LockedSeat> {
        let sql = match self.strategy {
            Strategy::SkipLocked => &ROUTED_LOCK_CHEAPEST,
            Strategy::Blocking => &ROUTED_LOCK_CHEAPEST_WAIT,
            Strategy::Nowait => &ROUTED_LOCK_CHEAPEST_NOWAIT,
            Strategy::Serializable => &ROUTED_PICK_CHEAPEST,
        };
        let query = sqlx::query_as(sql.text(self.route)).bind(self.events).bind(self.classes).bind(self.need);
        // Routed (Citus), every group starts at its head: the spread
        // function reads the seats itself, and a function that reads a
        // distributed table cannot run beside a shard.
        let spread_from = if self.route.is_some() { i32::MAX } else { SPREAD_FROM_NEED };
        match self.strategy {
            Strategy::SkipLocked => query.bind(spread_from),
            _ => query,
        }
        .route(self.route)
    }
}

/// A row of [`LOCK_CHEAPEST`]: a locked seat of group `grp` (1-based), or a
/// NULL seat for a group that got none, with its event's rules.
#[derive(Debug, sqlx::FromRow)]
pub struct LockedSeat {
    pub grp: i64,
    /// The event exists.
    pub known: bool,
    /// Why its sales refuse now; `None` while on sale.
    pub refusal: Option<String>,
    pub per_customer: Option<i32>,
    /// The class has a waiting list: its free seats are the list's
    /// (migrations/0012_waiting_list.sql), and none is locked.
    pub lined: bool,
    pub seat: Option<i32>,
    pub class: Option<i16>,
    pub row: Option<i32>,
    pub pos: Option<i32>,
    pub price_cents: Option<i32>,
    pub section: Option<String>,
    pub row_label: Option<String>,
    pub label: Option<String>,
}

impl LockedSeat {
    /// The seat locked, if any.
    pub fn seat(self) -> Option<SeatInfo> {
        Some(SeatInfo {
            seat: self.seat?,
            class: self.class?,
            row: self.row?,
            pos: self.pos?,
            price_cents: self.price_cents?,
            section: self.section?,
            row_label: self.row_label?,
            label: self.label?,
        })
    }
}

/// The parameters of [`WARM_SPREAD`]: none.
#[derive(Debug, Clone, Copy, Default)]
pub struct WarmSpread;

impl WarmSpread {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(WARM_SPREAD)
    }
}

/// For each group of [`CountFree`] (as in [`LOCK_CHEAPEST`]), how many of
/// its seats are free by committed state, counted up to the group's need.
/// More free than locked
/// means other transactions hold some: contention, not a sell-out. With none
/// free, whether the event has the class at all (`seatq.has_class`, written
/// out: on Citus a function that reads a table cannot run beside a shard): a
/// class it does not have is `unknown_class`, not `sold_out`.
pub const COUNT_FREE: &str = "
SELECT g.ord AS grp, f.free,
       f.free > 0 OR EXISTS (SELECT 1 FROM seatq.seats c WHERE c.event_id = g.event_id AND c.class = g.class AND c.state <> 'booked' /*route c.event_id*/)
           OR EXISTS (SELECT 1 FROM seatq.seats c WHERE c.event_id = g.event_id AND c.class = g.class /*route c.event_id*/) AS has_class
FROM unnest($1::bigint[], $2::smallint[], $3::int[]) WITH ORDINALITY AS g(event_id, class, need, ord)
CROSS JOIN LATERAL (
    SELECT count(*) AS free FROM (
        SELECT 1 FROM seatq.seats
        WHERE event_id = g.event_id AND class = g.class
          AND seatq.is_free(state, held_until) /*route event_id*/
        LIMIT g.need) f
) f";
static ROUTED_COUNT_FREE: Routable = Routable::new(COUNT_FREE);

/// The parameters of [`COUNT_FREE`]: group k is class `classes[k]` of event
/// `events[k]`, as in [`LockCheapest`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CountFree<'a> {
    pub events: &'a [i64],
    pub classes: &'a [i16],
    /// Count up to this many free seats.
    pub need: &'a [i32],
    /// The one event of every group, as [`LockCheapest::route`].
    pub route: Option<i64>,
}

impl<'a> CountFree<'a> {
    pub fn query(&self) -> Rows<'a, FreeCount> {
        sqlx::query_as(ROUTED_COUNT_FREE.text(self.route))
            .bind(self.events)
            .bind(self.classes)
            .bind(self.need)
            .route(self.route)
    }
}

/// A row of [`COUNT_FREE`]: the free seats of group `grp` (1-based).
#[derive(Debug, sqlx::FromRow)]
pub struct FreeCount {
    pub grp: i64,
    /// Free by committed state, at most the group's need.
    pub free: i64,
    /// The event has seats of the class.
    pub has_class: bool,
}

/// The seats customers named ([`LockNamed`]): for every one that exists,
/// the seat, whether this transaction now holds its lock (taken with
/// SKIP LOCKED: false means an in-flight transaction holds it), whether it
/// is not for sale, and whether it is free. Freeness is read from the locked
/// row's latest version, so it is only trusted where `locked`.
pub const LOCK_NAMED: &str = "
WITH want AS (
    SELECT DISTINCT event_id, seat_no FROM unnest($1::bigint[], $2::int[]) AS w(event_id, seat_no)
), locked AS MATERIALIZED (
    SELECT s.event_id, s.seat_no, s.state, s.held_until
    FROM seatq.seats s JOIN want w ON s.event_id = w.event_id AND s.seat_no = w.seat_no /*route s.event_id*/
    FOR UPDATE OF s SKIP LOCKED
)
SELECT s.event_id AS event, s.seat_no AS seat, s.class, s.row_no AS row, s.pos, s.price_cents,
       s.section, s.row_label, s.label,
       l.seat_no IS NOT NULL AS locked,
       s.state = 'blocked' AS blocked,
       coalesce(seatq.is_free(l.state, l.held_until), false) AS free
FROM want w
JOIN seatq.seats s ON s.event_id = w.event_id AND s.seat_no = w.seat_no /*route s.event_id*/
LEFT JOIN locked l ON l.event_id = w.event_id AND l.seat_no = w.seat_no";
static ROUTED_LOCK_NAMED: Routable = Routable::new(LOCK_NAMED);

/// The parameters of [`LOCK_NAMED`]: seat k is `seats[k]` of `events[k]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockNamed<'a> {
    pub events: &'a [i64],
    /// Seat numbers.
    pub seats: &'a [i32],
    /// The one event of every seat, as [`LockCheapest::route`].
    pub route: Option<i64>,
}

impl<'a> LockNamed<'a> {
    pub fn query(&self) -> Rows<'a, NamedSeat> {
        sqlx::query_as(ROUTED_LOCK_NAMED.text(self.route)).bind(self.events).bind(self.seats).route(self.route)
    }
}

/// A named seat, as [`LOCK_NAMED`] found it.
#[derive(Debug, sqlx::FromRow)]
pub struct NamedSeat {
    pub event: i64,
    #[sqlx(flatten)]
    pub seat: SeatInfo,
    /// This transaction holds its lock.
    pub locked: bool,
    /// Not for sale.
    pub blocked: bool,
    /// Free (trusted only where locked).
    pub free: bool,
}

/// The runs of adjacent free seats (consecutive positions in one row) of
/// each group of [`FreeRuns`] that could seat its party, by committed state:
/// per run, its row and its seats, positions and prices
/// in position order. A group with no such run has one row without a run,
/// saying whether the event has the class at all (`seatq.has_class`, written
/// out as in [`COUNT_FREE`]: a class
/// it does not have is `unknown_class`, not `no_adjacent_seats`). Locks are
/// taken afterwards, on the seats chosen ([`LOCK_FREE_SEATS`]).
pub const FREE_RUNS: &str = "
SELECT g.ord AS grp, r.row, r.seats, r.positions, r.prices,
       r.row IS NOT NULL OR EXISTS (SELECT 1 FROM seatq.seats c WHERE c.event_id = g.event_id AND c.class = g.class AND c.state <> 'booked' /*route c.event_id*/)
           OR EXISTS (SELECT 1 FROM seatq.seats c WHERE c.event_id = g.event_id AND c.class = g.class /*route c.event_id*/) AS has_class
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
          AND seatq.is_free(state, held_until) /*route event_id*/
    ) f
    GROUP BY f.row_no, f.run
    HAVING count(*) >= g.party
) r ON true
ORDER BY g.ord, r.row, r.positions[1]";
static ROUTED_FREE_RUNS: Routable = Routable::new(FREE_RUNS);

/// The parameters of [`FREE_RUNS`]: group k is class `classes[k]` of event
/// `events[k]`, for a party of `party[k]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FreeRuns<'a> {
    pub events: &'a [i64],
    pub classes: &'a [i16],
    /// The fewest adjacent seats a run must have.
    pub party: &'a [i32],
    /// The one event of every group, as [`LockCheapest::route`].
    pub route: Option<i64>,
}

impl<'a> FreeRuns<'a> {
    pub fn query(&self) -> Rows<'a, FreeRun> {
        sqlx::query_as(ROUTED_FREE_RUNS.text(self.route))
            .bind(self.events)
            .bind(self.classes)
            .bind(self.party)
            .route(self.route)
    }
}

/// A row of [`FREE_RUNS`]: a run of adjacent free seats in one row, or none,
/// for group `grp` (1-based).
#[derive(Debug, sqlx::FromRow)]
pub struct FreeRun {
    pub grp: i64,
    pub row: Option<i32>,
    /// Its seats, positions and prices, in position order.
    pub seats: Option<Vec<i32>>,
    pub positions: Option<Vec<i32>>,
    pub prices: Option<Vec<i32>>,
    /// The event has seats of the class.
    pub has_class: bool,
}

/// Lock these seats ([`LockFreeSeats`]) where they are free, skipping those
/// in-flight transactions hold; returns the seats locked.
pub const LOCK_FREE_SEATS: &str = "
SELECT s.event_id AS event, s.seat_no AS seat, s.class, s.row_no AS row, s.pos, s.price_cents,
       s.section, s.row_label, s.label
FROM (SELECT DISTINCT event_id, seat_no FROM unnest($1::bigint[], $2::int[]) AS w(event_id, seat_no)) w
JOIN seatq.seats s ON s.event_id = w.event_id AND s.seat_no = w.seat_no
WHERE seatq.is_free(s.state, s.held_until) /*route s.event_id*/
FOR UPDATE OF s SKIP LOCKED";
static ROUTED_LOCK_FREE_SEATS: Routable = Routable::new(LOCK_FREE_SEATS);

/// The parameters of [`LOCK_FREE_SEATS`]: seat k is `seats[k]` of `events[k]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockFreeSeats<'a> {
    pub events: &'a [i64],
    /// Seat numbers.
    pub seats: &'a [i32],
    /// The one event of every seat, as [`LockCheapest::route`].
    pub route: Option<i64>,
}

impl<'a> LockFreeSeats<'a> {
    pub fn query(&self) -> Rows<'a, EventSeat> {
        sqlx::query_as(ROUTED_LOCK_FREE_SEATS.text(self.route)).bind(self.events).bind(self.seats).route(self.route)
    }
}

/// A seat of some event, as [`LOCK_FREE_SEATS`] returns it.
#[derive(Debug, sqlx::FromRow)]
pub struct EventSeat {
    pub event: i64,
    #[sqlx(flatten)]
    pub seat: SeatInfo,
}

/// Create bookings and give them their (already locked) seats, for many
/// requests in one statement ([`TakeSeats`]: the bookings, and their seats).
/// A hold never outlives its event's sales: it is cut to the end of its
/// sales, `seatq.sales_end` (a primary-key seek per hold, not a join: a join
/// lets the planner scan every event). Each booking carries its request's
/// producer, read from the request row when the batch claimed it, which
/// alone may see and act on the booking. Returns, per booking, its request,
/// id, expiry and how many seats changed ([`BookingMade`]).
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
                         $10::text[], $11::boolean[], $12::bytea[], $13::text[])
        AS b(request_id, event_id, customer, state, total_cents, hold_secs, producer, limited, token_hash, customer_key)
), s AS (
    SELECT * FROM unnest($7::bigint[], $8::bigint[], $9::int[]) AS s(request_id, event_id, seat_no)
), booking AS (
    INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, held_until, request_id, producer, limited,
                                token_hash, customer_key)
    SELECT b.event_id, b.customer, b.state, g.seats, b.total_cents,
           CASE WHEN b.hold_secs IS NOT NULL
                THEN least(now() + b.hold_secs * interval '1 second',
                           (SELECT seatq.sales_end(e.sales_until, e.closed_at) FROM seatq.events e WHERE e.id = b.event_id)) END,
           b.request_id,
           b.producer,
           b.limited,
           b.token_hash,
           b.customer_key
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

/// The parameters of [`TAKE_SEATS`]: booking k is made for request
/// `requests[k]`, with every seat j whose `seat_requests[j]` is that request.
#[derive(Debug, Clone, Copy, Default)]
pub struct TakeSeats<'a> {
    /// Per booking: the request that makes it,
    pub requests: &'a [i64],
    /// its event,
    pub events: &'a [i64],
    /// its customer,
    pub customers: &'a [&'a str],
    /// held or booked,
    pub states: &'a [BookingState],
    /// what its seats cost in all,
    pub total_cents: &'a [i64],
    /// how many seconds a hold lasts (`None` books),
    pub hold_secs: &'a [Option<i32>],
    /// Per seat: the request it is taken for,
    pub seat_requests: &'a [i64],
    /// its event,
    pub seat_events: &'a [i64],
    /// its number.
    pub seat_numbers: &'a [i32],
    /// Per booking again: its request's producer (as the batch claimed it),
    pub producers: &'a [&'a str],
    /// and whether it counts toward its event's per-customer limit (the
    /// event has one; only those are in `bookings_by_customer`).
    pub limited: &'a [bool],
    /// and the hash of its request's hold token (none: the booking answers
    /// to its customer's name).
    pub token_hashes: &'a [Option<&'a [u8]>],
    /// and its customer in normal form (who the per-customer limit counts;
    /// none where that is the name as given).
    pub customer_keys: &'a [Option<&'a str>],
}

impl<'a> TakeSeats<'a> {
    pub fn query(&self) -> Rows<'a, BookingMade> {
        sqlx::query_as(TAKE_SEATS)
            .bind(self.requests)
            .bind(self.events)
            .bind(self.customers)
            .bind(self.states)
            .bind(self.total_cents)
            .bind(self.hold_secs)
            .bind(self.seat_requests)
            .bind(self.seat_events)
            .bind(self.seat_numbers)
            .bind(self.producers)
            .bind(self.limited)
            .bind(self.token_hashes)
            .bind(self.customer_keys)
    }
}

/// For a batch routed to one event (Citus), when its sales end
/// (`seatq.sales_end`; none: no end) and the transaction's time: a hold
/// made now lasts until the earlier of its time and that end ([`SalesEnd`]).
pub const SALES_END: &str = "
SELECT now() AS now, (SELECT seatq.sales_end(e.sales_until, e.closed_at) FROM seatq.events e WHERE e.id = $1) AS ends";

/// The parameters of [`SALES_END`].
#[derive(Debug, Clone, Copy)]
pub struct SalesEnd {
    pub event: i64,
}

impl SalesEnd {
    pub fn query(&self) -> Rows<'static, SalesEndRow> {
        sqlx::query_as(SALES_END).bind(self.event)
    }
}

/// A row of [`SALES_END`].
#[derive(Debug, sqlx::FromRow)]
pub struct SalesEndRow {
    pub now: DateTime<Utc>,
    pub ends: Option<DateTime<Utc>>,
}

/// [`TAKE_SEATS`]'s first half, for a batch routed to one event (Citus):
/// create `rows` bookings of one event in one multi-row `VALUES`
/// ([`InsertBookings`]), returning each one's request, id and expiry.
/// Citus sends a multi-row insert of one event to its node alone and
/// commits it there in one phase; an `INSERT ... SELECT` from the
/// parameters (as [`TAKE_SEATS`]'s) it computes on the coordinator and
/// copies to the node, which it always commits in two. The text is made
/// once for each number of rows, from that number alone, and `rows` is a
/// power of two ([`InsertBookings::chunks`]), so that a process keeps
/// eleven texts, and each connection as many prepared statements, whatever
/// its batches' sizes; [`TAKE_BOOKED_SEATS`] then gives the bookings their
/// seats.
pub fn insert_bookings(rows: usize) -> &'static str {
    static TEXTS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    while texts.len() <= rows {
        let n = texts.len();
        let values: Vec<String> = (0..n)
            .map(|k| {
                let p: Vec<String> =
                    (1..=INSERT_BOOKING_COLUMNS).map(|c| format!("${}", k * INSERT_BOOKING_COLUMNS + c)).collect();
                format!("({})", p.join(", "))
            })
            .collect();
        // Made once per number of rows and kept for the process's life: a
        // prepared statement's text must outlive its cache entry.
        let text = format!(
            "INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, held_until, request_id, producer, \
             limited, token_hash, customer_key) VALUES {} RETURNING request_id, id AS booking, held_until, 0::bigint AS taken",
            values.join(", ")
        );
        texts.push(Box::leak(text.into_boxed_str()));
    }
    texts[rows]
}

/// Parameters a row of [`insert_bookings`] binds.
const INSERT_BOOKING_COLUMNS: usize = 11;

/// One booking of [`insert_bookings`].
#[derive(Debug, Clone, Copy)]
pub struct NewBooking<'a> {
    pub event: i64,
    pub customer: &'a str,
    pub state: BookingState,
    pub seats: &'a [i32],
    pub total_cents: i64,
    pub held_until: Option<DateTime<Utc>>,
    pub request: i64,
    pub producer: &'a str,
    pub limited: bool,
    pub token_hash: Option<&'a [u8]>,
    pub customer_key: Option<&'a str>,
}

/// The parameters of [`insert_bookings`]: the bookings, of one event.
#[derive(Debug, Clone, Copy)]
pub struct InsertBookings<'a> {
    pub bookings: &'a [NewBooking<'a>],
}

impl<'a> InsertBookings<'a> {
    /// `bookings` in runs of powers of two, largest first (100 is 64, 32
    /// and 4): one statement each.
    pub fn chunks(bookings: &'a [NewBooking<'a>]) -> impl Iterator<Item = InsertBookings<'a>> {
        let mut rest = bookings;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let size = 1 << rest.len().ilog2();
            let (chunk, after) = rest.split_at(size);
            rest = after;
            Some(InsertBookings { bookings: chunk })
        })
    }

    pub fn query(&self) -> Rows<'a, BookingMade> {
        let mut query = sqlx::query_as(insert_bookings(self.bookings.len()));
        for b in self.bookings {
            query = query
                .bind(b.event)
                .bind(b.customer)
                .bind(b.state)
                .bind(b.seats)
                .bind(b.total_cents)
                .bind(b.held_until)
                .bind(b.request)
                .bind(b.producer)
                .bind(b.limited)
                .bind(b.token_hash)
                .bind(b.customer_key);
        }
        query
    }
}

/// [`TAKE_SEATS`]'s second half, routed ([`TakeBookedSeats`]): give each
/// (locked) seat to its booking, in its state; returns the booking of each
/// seat changed.
pub const TAKE_BOOKED_SEATS: &str = "
WITH s AS (
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::seatq.seat_state[], $5::timestamptz[])
        AS s(event_id, seat_no, booking_id, state, held_until)
)
UPDATE seatq.seats t SET state = s.state, booking_id = s.booking_id, held_until = s.held_until
FROM s
WHERE t.event_id = s.event_id AND t.seat_no = s.seat_no /*route t.event_id*/
RETURNING t.booking_id";
static ROUTED_TAKE_BOOKED_SEATS: Routable = Routable::new(TAKE_BOOKED_SEATS);

/// The parameters of [`TAKE_BOOKED_SEATS`]: seat k of event `events[k]`,
/// numbered `seats[k]`, goes to booking `bookings[k]` in state `states[k]`
/// until `held_until[k]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TakeBookedSeats<'a> {
    pub events: &'a [i64],
    pub seats: &'a [i32],
    pub bookings: &'a [i64],
    pub states: &'a [SeatState],
    pub held_until: &'a [Option<DateTime<Utc>>],
    /// Their one event.
    pub route: Option<i64>,
}

impl<'a> TakeBookedSeats<'a> {
    pub fn query(&self) -> Scalars<'a, Option<i64>> {
        sqlx::query_scalar(ROUTED_TAKE_BOOKED_SEATS.text(self.route))
            .bind(self.events)
            .bind(self.seats)
            .bind(self.bookings)
            .bind(self.states)
            .bind(self.held_until)
            .route(self.route)
    }
}

/// A row of [`TAKE_SEATS`] (and of [`insert_bookings`], `taken` then 0): a booking made.
#[derive(Debug, sqlx::FromRow)]
pub struct BookingMade {
    /// The request it was made for.
    pub request_id: i64,
    /// Its id.
    pub booking: i64,
    /// When a hold lapses; `None` for a booking.
    pub held_until: Option<DateTime<Utc>>,
    /// How many seats it took.
    pub taken: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn booking(request: i64) -> NewBooking<'static> {
        NewBooking {
            event: 1,
            customer: "ann",
            state: BookingState::Booked,
            seats: &[1],
            total_cents: 0,
            held_until: None,
            request,
            producer: "shop",
            limited: false,
            token_hash: None,
            customer_key: None,
        }
    }

    #[test]
    fn bookings_are_inserted_in_runs_of_powers_of_two_in_order() {
        let bookings: Vec<NewBooking> = (0..100).map(booking).collect();
        let runs: Vec<Vec<i64>> =
            InsertBookings::chunks(&bookings).map(|c| c.bookings.iter().map(|b| b.request).collect()).collect();
        assert_eq!(runs.iter().map(Vec::len).collect::<Vec<_>>(), [64, 32, 4]);
        assert_eq!(runs.concat(), (0..100).collect::<Vec<i64>>());
        assert_eq!(InsertBookings::chunks(&[]).count(), 0);
    }

    #[test]
    fn an_insert_of_n_rows_binds_eleven_parameters_a_row() {
        let text = insert_bookings(4);
        assert_eq!(text.matches("), (").count(), 3, "{text}");
        assert!(text.contains("$44)") && !text.contains("$45"), "{text}");
        assert!(std::ptr::eq(text, insert_bookings(4)), "made once");
    }
}
