//! Events and seats.

/// Create events by name ($1, in order), or find the existing ones; returns
/// their ids in the order given. DO NOTHING, not DO UPDATE: updating an
/// event row would lock it against the bookings being made on it.
pub const ADD_EVENTS: &str = "
WITH names AS (
    SELECT name, ord FROM unnest($1::text[]) WITH ORDINALITY AS n(name, ord)
), new AS (
    INSERT INTO seatq.events (name)
    SELECT name FROM names ORDER BY ord
    ON CONFLICT (name) DO NOTHING
    RETURNING id, name
)
SELECT coalesce(new.id, old.id) AS id
FROM names
LEFT JOIN new ON new.name = names.name
LEFT JOIN seatq.events old ON old.name = names.name
ORDER BY names.ord";

/// Give each event of $1 seats 1..=$2, $3 to a row, laid out like the classic
/// airline example: class 1 for seats 1-19, class 2 for 20-49, class 3 for 50
/// and up, each class with a dearer front half and a cheaper back half. Every
/// seat is in section "Cabin", its row labelled with the row number and the
/// seat with row and letter ("12C"), or its number when a row is wider than
/// the alphabet. Idempotent.
pub const ADD_SEATS: &str = "
INSERT INTO seatq.seats (event_id, seat_no, class, price_cents, row_no, pos, section, row_label, label)
SELECT e.id, s, c.class,
       CASE c.class
           WHEN 1 THEN CASE WHEN s <= 9 THEN 90000 ELSE 75000 END
           WHEN 2 THEN CASE WHEN s <= 34 THEN 40000 ELSE 32000 END
           ELSE CASE WHEN s <= 50 + ($2 - 50) / 2 THEN 15000 ELSE 12000 END
       END,
       (s - 1) / $3 + 1, (s - 1) % $3 + 1,
       'Cabin', ((s - 1) / $3 + 1)::text,
       CASE WHEN $3 <= 26 THEN ((s - 1) / $3 + 1)::text || chr(65 + (s - 1) % $3) ELSE s::text END
FROM unnest($1::bigint[]) AS e(id)
CROSS JOIN generate_series(1, $2) s
CROSS JOIN LATERAL (SELECT CASE WHEN s <= 19 THEN 1 WHEN s <= 49 THEN 2 ELSE 3 END AS class) c
ON CONFLICT DO NOTHING";

/// Create an imported event: name, venue, start, on sale from, until (by
/// default its start), per-customer limit. Fails on a name already used.
pub const IMPORT_EVENT: &str = "
INSERT INTO seatq.events (name, venue, starts_at, sales_from, sales_until, per_customer)
VALUES ($1, $2, $3, $4, coalesce($5, $3), $6)
RETURNING id";

/// The id of the event named $1.
pub const EVENT_BY_NAME: &str = "SELECT id FROM seatq.events WHERE name = $1";

/// Give event $1 its imported seats, numbered 1.. in file order: per seat
/// its row number (one per section and row), position, class, price,
/// section, row and seat labels, and whether it is for sale (else blocked).
pub const IMPORT_SEATS: &str = "
INSERT INTO seatq.seats (event_id, seat_no, row_no, pos, class, price_cents, section, row_label, label, state)
SELECT $1, s.ord, s.row_no, s.pos, s.class, s.price_cents, s.section, s.row_label, s.label,
       CASE WHEN s.for_sale THEN 'available' ELSE 'blocked' END::seatq.seat_state
FROM unnest($2::int[], $3::int[], $4::smallint[], $5::int[], $6::text[], $7::text[], $8::text[], $9::bool[])
    WITH ORDINALITY AS s(row_no, pos, class, price_cents, section, row_label, label, for_sale, ord)";

/// Every event (or only event $1), with its seat counts (taken: live holds
/// and bookings), counted by `seatq.availability`: a producer login may run
/// it (it may not read the seats themselves).
pub const LIST_EVENTS: &str = "
SELECT e.id, e.name, e.venue, e.starts_at, e.sales_from, e.sales_until, e.closed_at, e.per_customer,
       seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal,
       coalesce(sum(a.seats), 0)::bigint AS seats,
       coalesce(sum(a.free), 0)::bigint AS free,
       coalesce(sum(a.held + a.booked), 0)::bigint AS taken,
       coalesce(sum(a.seats - a.free - a.held - a.booked), 0)::bigint AS blocked
FROM seatq.events e
LEFT JOIN LATERAL seatq.availability(e.id) a ON true
WHERE $1::bigint IS NULL OR e.id = $1
GROUP BY e.id
ORDER BY e.id";

/// Event $1's seats by section, class and how they show to a storefront
/// (free, held, booked, not for sale), with the price range, in the order
/// of the sections' first rows; from `seatq.seat_map`, so a producer login
/// may run it.
pub const SEAT_GROUPS: &str = "
SELECT section, class, state, count(*) AS seats,
       min(price_cents) AS min_price_cents, max(price_cents) AS max_price_cents
FROM seatq.seat_map($1)
GROUP BY section, class, state
ORDER BY min(row_no), class, state";

/// Stop event $1's sales now (kept if already closed), and cut its live
/// holds to that moment, seats and bookings alike: a hold never outlives its
/// event's sales, so they lapse at once (confirm is then `hold_expired`) and
/// the sweeper releases them (`seatq.cut_holds`). Whether the event exists.
pub const CLOSE_EVENT: &str = "
WITH closed AS (
    UPDATE seatq.events SET closed_at = coalesce(closed_at, now()) WHERE id = $1 RETURNING id, closed_at
)
SELECT id FROM closed, seatq.cut_holds(id, closed_at)";

/// Event $1 as it stands, locked until the transaction ends (for an edit).
pub const LOCK_EVENT: &str = "
SELECT name, venue, starts_at, sales_from, sales_until, per_customer
FROM seatq.events WHERE id = $1 FOR UPDATE";

/// Set event $1's name ($2), venue ($3), start ($4), sales window ($5,
/// $6) and per-customer limit ($7), and cut its live holds to the end of
/// its sales (`seatq.sales_end`), seats and bookings alike: moving
/// `sales_until` earlier shortens the holds already made, as it caps new
/// ones. A limit set or changed counts from then on (`events_limit_added`).
pub const EDIT_EVENT: &str = "
WITH edited AS (
    UPDATE seatq.events
    SET name = $2, venue = $3, starts_at = $4, sales_from = $5, sales_until = $6, per_customer = $7
    WHERE id = $1
    RETURNING id, seatq.sales_end(sales_until, closed_at) AS sales_end
)
SELECT id FROM edited, seatq.cut_holds(id, sales_end)";

/// Whether event $1 has been used: any booking of it (live, lapsed or
/// cancelled: history), or a request naming it still queued.
pub const EVENT_IN_USE: &str = "
SELECT EXISTS (SELECT 1 FROM seatq.bookings WHERE event_id = $1)
    OR EXISTS (SELECT 1 FROM seatq.requests WHERE status = 'queued' AND payload -> 'event' = to_jsonb($1::bigint))";

/// Delete event $1's seats, then the event; the event's id, if it existed.
pub const DELETE_EVENT: &str = "
WITH seats AS (DELETE FROM seatq.seats WHERE event_id = $1)
DELETE FROM seatq.events WHERE id = $1 RETURNING id";
