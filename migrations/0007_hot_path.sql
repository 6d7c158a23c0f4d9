-- The hot path: every seat a worker takes is an UPDATE of seatq.seats, and
-- every request it finishes an UPDATE of seatq.requests. Each index on a
-- changed column, and each foreign key checked, is paid for once per seat,
-- thousands of times a second. Keep only what the queries need; the
-- invariants those indexes and keys used to guard are checked by
-- seatq.check_invariants() instead (below).

-- A booking's seats are found through the booking's own list and the primary
-- key (event_id, seat_no); an index on booking_id was one more index entry
-- for every seat taken.
DROP INDEX seatq.seats_by_booking;

-- Foreign-key checks lock the parent row: every booking of a sold-out show
-- would take a share lock on the same event row (a new MultiXact per
-- concurrent worker), and every seat taken would lock its booking row. The
-- worker writes bookings and seats together, in one statement, from seats it
-- has locked; check_invariants() verifies that every taken seat belongs to a
-- live booking of the same event that lists it.
ALTER TABLE seatq.bookings DROP CONSTRAINT bookings_event_id_fkey;
ALTER TABLE seatq.seats DROP CONSTRAINT seats_booking_id_fkey;

-- The layout (row and position of each seat) is written once, when an event
-- is seeded; a unique index on it would still take a new entry on every seat
-- update. check_invariants() reports duplicates.
ALTER TABLE seatq.seats DROP CONSTRAINT seats_event_id_row_no_pos_key;

-- Requests without an idempotency key (most of them) need no entry in the
-- key's index, on insert or on the update that records their outcome.
ALTER TABLE seatq.requests DROP CONSTRAINT requests_idempotency_key_key;
CREATE UNIQUE INDEX requests_idempotency_key ON seatq.requests (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- (As in 0005, with the ON CONFLICT target now the partial index.)
CREATE OR REPLACE FUNCTION seatq.enqueue(
    p_kind text,
    p_payload jsonb,
    p_idempotency_key text DEFAULT NULL,
    p_priority int DEFAULT 0,
    p_run_at timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767'
            USING ERRCODE = 'numeric_value_out_of_range', DETAIL = format('priority %s was given', p_priority);
    END IF;
    INSERT INTO seatq.requests (kind, payload, idempotency_key, priority, run_at)
    VALUES (p_kind, p_payload, p_idempotency_key, p_priority, p_run_at)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        SELECT id INTO v_id FROM seatq.requests WHERE idempotency_key = p_idempotency_key;
    END IF;
    RETURN v_id;
END
$$;

-- Every violation of seatq's invariants, one row each; no rows means healthy.
-- A seat or booking is "live" when booked, or held and not yet lapsed. With
-- p_drained, requests still queued are violations too. Set-based (hash joins
-- and one pass over the seats), so it stays fast on large inventories.
CREATE OR REPLACE FUNCTION seatq.check_invariants(p_drained boolean DEFAULT false)
RETURNS TABLE (violation text, detail text)
LANGUAGE sql STABLE AS $$
    WITH live_bookings AS MATERIALIZED (
        SELECT * FROM seatq.bookings
        WHERE state = 'booked' OR (state = 'held' AND held_until > now())
    ), granted AS MATERIALIZED (
        SELECT b.id, b.event_id, b.state, g.seat
        FROM live_bookings b CROSS JOIN LATERAL unnest(b.seats) AS g(seat)
    )
    -- no seat granted to two live bookings
    SELECT 'seat_in_two_bookings',
           format('event %s seat %s is in bookings %s', event_id, seat, array_agg(id ORDER BY id))
    FROM granted
    GROUP BY event_id, seat HAVING count(*) > 1
    UNION ALL
    -- every seat a live booking lists is that booking's, in its state
    SELECT 'booking_seats_mismatch',
           format('booking %s lists event %s seat %s, which is %s by booking %s', g.id, g.event_id, g.seat,
                  coalesce(s.state::text, 'missing'), coalesce(s.booking_id::text, 'none'))
    FROM granted g
    LEFT JOIN seatq.seats s ON s.event_id = g.event_id AND s.seat_no = g.seat
    WHERE s.booking_id IS DISTINCT FROM g.id OR s.state::text <> g.state::text
    UNION ALL
    -- every taken seat belongs to a live booking of its event that lists it
    SELECT 'seat_without_booking',
           format('event %s seat %s is %s by booking %s', s.event_id, s.seat_no, s.state, s.booking_id)
    FROM seatq.seats s
    LEFT JOIN live_bookings b ON b.id = s.booking_id
    WHERE (s.state = 'booked' OR (s.state = 'held' AND s.held_until > now()))
      AND (b.id IS NULL OR b.event_id <> s.event_id OR b.state::text <> s.state::text
           OR NOT s.seat_no = ANY (b.seats))
    UNION ALL
    -- one seat per place in the layout
    SELECT 'seat_layout_duplicate',
           format('event %s row %s position %s holds seats %s', event_id, row_no, pos,
                  array_agg(seat_no ORDER BY seat_no))
    FROM seatq.seats
    GROUP BY event_id, row_no, pos HAVING count(*) > 1
    UNION ALL
    -- exactly-once effects: every booking was made by a request that
    -- succeeded and reports it (pruning may have deleted the request since)
    SELECT 'booking_without_outcome',
           format('booking %s was made by request %s, which is %s', b.id, b.request_id, r.status)
    FROM seatq.bookings b
    JOIN seatq.requests r ON r.id = b.request_id
    WHERE r.status <> 'succeeded'
       OR r.kind NOT IN ('hold', 'book')
       OR (r.result ->> 'booking')::bigint IS DISTINCT FROM b.id
    UNION ALL
    -- and every successful hold or book made exactly the booking it reports
    SELECT 'outcome_without_booking',
           format('request %s reports booking %s, which it did not make', r.id, r.result ->> 'booking')
    FROM seatq.requests r
    LEFT JOIN seatq.bookings b ON b.id = (r.result ->> 'booking')::bigint
    WHERE r.status = 'succeeded' AND r.kind IN ('hold', 'book')
      AND (b.id IS NULL OR b.request_id <> r.id
           OR cardinality(b.seats) <> jsonb_array_length(r.result -> 'seats'))
    UNION ALL
    SELECT 'request_not_terminal', format('request %s is still queued', r.id)
    FROM seatq.requests r
    WHERE p_drained AND r.status = 'queued'
$$;
