-- Availability: what a storefront shows before anyone books, readable by the
-- producer role. Per class of an event, how many seats are free and at what
-- prices (seatq.availability), and the event's seat map, each seat free or
-- taken (seatq.seat_map); and for `seatq stats`, the seats of all events by
-- state (seatq.seats_by_state). None of these says who holds or booked a
-- seat, nor which booking it is in.
--
-- The same map in two parts, for a storefront that reads it on every page
-- view: the layout (seatq.seat_layout: where each seat is and what it
-- costs), which never changes once an event's seats are made, read once
-- and kept; and the states (seatq.seat_states: one row naming only the
-- seats that are not free), read again whenever the map is to be fresh.
-- The producer library's cache does exactly that (docs/checkout.md).
--
-- Passive expiry applies, as everywhere (seatq.is_free, seatq.is_live in
-- 0003_inventory.sql): a seat whose hold has lapsed is free here, whether or
-- not the sweeper has released it yet.
--
-- Why functions, SECURITY DEFINER: the producer role may not read
-- seatq.seats (its booking_id would name every booking, and through
-- seatq.bookings every customer), and a view would not do: a view runs with
-- its owner's rights but hands its reader whatever columns it has, with no
-- way to take the event as a parameter that the planner sees. A function that
-- runs as its owner (the role that applies the migrations) and returns only
-- the columns below gives the producer exactly this and nothing more. It
-- names every object with its schema and runs with a fixed search_path, so
-- a caller's own objects cannot stand in for seatq's (the usual hazard of a
-- SECURITY DEFINER function).
--
-- Each reads the event's seats through the primary key (event_id, seat_no):
-- every seat of the event is counted, so no partial index would save a row.
-- A plain read takes no row locks: it never waits for a worker, and no worker
-- waits for it. STABLE: one snapshot, one now(), for the whole answer.
--
-- A seat in a state other than available, held or booked (seats set aside,
-- not for sale) is neither free nor taken: is_free and is_live are both
-- false for it, so it counts only in `seats` and shows as `not_for_sale` on
-- the map.

-- How a seat shows on the map: free (available, or its hold lapsed), held
-- (a live hold), booked, or not for sale.
CREATE TYPE seatq.seat_availability AS ENUM ('free', 'held', 'booked', 'not_for_sale');

-- How a seat in this state shows, decided once for every function below.
-- A single expression, inlined where it is used (as seatq.is_free is, in
-- 0003_inventory.sql); each outcome a constant of the type, folded once,
-- not text cast row by row.
CREATE FUNCTION seatq.shown_as(p_state seatq.seat_state, p_held_until timestamptz)
RETURNS seatq.seat_availability
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
               WHEN seatq.is_free(p_state, p_held_until) THEN 'free'::seatq.seat_availability
               WHEN p_state = 'booked' THEN 'booked'::seatq.seat_availability
               WHEN seatq.is_live(p_state, p_held_until) THEN 'held'::seatq.seat_availability
               ELSE 'not_for_sale'::seatq.seat_availability
           END
$$;

-- Per class of the event: seats in all, how many free, held and booked, the
-- price range of the free seats (null when none is free) and of all seats.
-- No rows for an event that does not exist or has no seats.
CREATE FUNCTION seatq.availability(p_event bigint)
RETURNS TABLE (
    class          smallint,
    seats          bigint,
    free           bigint,
    held           bigint,
    booked         bigint,
    free_min_cents int,
    free_max_cents int,
    min_cents      int,
    max_cents      int
)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.class,
           count(*),
           count(*) FILTER (WHERE s.shown = 'free'),
           count(*) FILTER (WHERE s.shown = 'held'),
           count(*) FILTER (WHERE s.shown = 'booked'),
           min(s.price_cents) FILTER (WHERE s.shown = 'free'),
           max(s.price_cents) FILTER (WHERE s.shown = 'free'),
           min(s.price_cents),
           max(s.price_cents)
    -- OFFSET 0 keeps the subquery from being merged into this one, so that
    -- each seat's shown_as is worked out once, not once per FILTER.
    FROM (SELECT class, price_cents, seatq.shown_as(state, held_until) AS shown
          FROM seatq.seats WHERE event_id = p_event OFFSET 0) s
    GROUP BY s.class
    ORDER BY s.class
$$;

-- Every seat of the event, in seat order: its place (as the venue names it,
-- and as row and position for drawing), class, price and how it shows. No rows for an event that does not exist or has no seats.
CREATE FUNCTION seatq.seat_map(p_event bigint)
RETURNS TABLE (seat_no int, section text, row_label text, label text, row_no int, pos int, class smallint,
               price_cents int, state seatq.seat_availability)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.seat_no, s.section, s.row_label, s.label, s.row_no, s.pos, s.class, s.price_cents,
           seatq.shown_as(s.state, s.held_until)
    FROM seatq.seats s
    WHERE s.event_id = p_event
    ORDER BY s.seat_no
$$;

-- The layout of the event's seats, in seat order: the columns of
-- seatq.seat_map that never change once the seats are made (seats are
-- never deleted, nor their place, class or price changed), to read once
-- and keep; read through seat_map, which costs that one read a few
-- milliseconds more (states worked out for nothing, a second sort) and
-- keeps the map's columns defined once. No rows for an event that does
-- not exist or has no seats.
CREATE FUNCTION seatq.seat_layout(p_event bigint)
RETURNS TABLE (seat_no int, section text, row_label text, label text, row_no int, pos int, class smallint,
               price_cents int)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT m.seat_no, m.section, m.row_label, m.label, m.row_no, m.pos, m.class, m.price_cents
    FROM seatq.seat_map(p_event) m
    ORDER BY m.seat_no
$$;

-- The states of the event's seats, in one row: how many seats it has, and
-- the numbers of those held (a live hold), booked and not for sale, in no
-- particular order; every other seat is free. With seatq.seat_layout, the
-- whole map: a fraction of its bytes, nothing per free seat, and nothing a
-- reader must parse twice. `seats` tells a reader whose kept layout is
-- short (seats were added since, as seatq's seed may add them) to read the
-- layout again. One row, zero seats and empty lists, for an event that does
-- not exist or has no seats.
--
-- Read on every refresh of a storefront's map, so its filters test the
-- seat's state directly: each list holds exactly the seats seatq.shown_as
-- shows that way (blocked is the one state neither free, booked nor live),
-- for a fraction of the cost of working shown_as out per seat (the tests
-- hold the two to the same answer), and unsorted, which saves a sort per
-- list.
CREATE FUNCTION seatq.seat_states(p_event bigint)
RETURNS TABLE (
    seats        bigint,
    held         int[],
    booked       int[],
    not_for_sale int[]
)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*),
           coalesce(array_agg(s.seat_no) FILTER (WHERE s.state = 'held' AND seatq.is_live(s.state, s.held_until)), '{}'),
           coalesce(array_agg(s.seat_no) FILTER (WHERE s.state = 'booked'), '{}'),
           coalesce(array_agg(s.seat_no) FILTER (WHERE s.state = 'blocked'), '{}')
    FROM seatq.seats s
    WHERE s.event_id = p_event
$$;

-- The seats of every event by state, as `seatq stats` shows them: the
-- seat's own state, or `lapsed` for a hold past its expiry that the sweeper
-- has not released yet. Counts only, so a producer login may read them
-- (through this function; not seatq.seats itself, for the reason above).
-- Reads every seat: for an operator's look, not a page view.
CREATE FUNCTION seatq.seats_by_state()
RETURNS TABLE (
    state text,
    seats bigint
)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN seatq.is_lapsed(s.state, s.held_until) THEN 'lapsed' ELSE s.state::text END,
           count(*)
    FROM seatq.seats s
    GROUP BY 1
    ORDER BY 1
$$;

-- Grants (0006_roles.sql revoked everything from PUBLIC before these
-- existed, so they start with PUBLIC's default EXECUTE, taken back here).
-- seatq.shown_as is for the functions above, which run as their owner;
-- admins have it as they have every function.
REVOKE ALL ON FUNCTION
    seatq.shown_as(seatq.seat_state, timestamptz),
    seatq.availability(bigint),
    seatq.seat_map(bigint),
    seatq.seat_layout(bigint),
    seatq.seat_states(bigint),
    seatq.seats_by_state()
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    seatq.availability(bigint),
    seatq.seat_map(bigint),
    seatq.seat_layout(bigint),
    seatq.seat_states(bigint),
    seatq.seats_by_state()
TO seatq_producer, seatq_worker, seatq_admin;
GRANT EXECUTE ON FUNCTION seatq.shown_as(seatq.seat_state, timestamptz) TO seatq_admin;
