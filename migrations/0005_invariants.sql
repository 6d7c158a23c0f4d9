-- Every violation of seatq's invariants, one row each; no rows means healthy.
-- A seat or booking is "live" when booked, or held and not yet lapsed
-- (seatq.is_live). With p_drained, requests still queued are violations too
-- (use it once a test or benchmark has waited for every outcome).
--
-- These are the invariants the hot path keeps without foreign keys or more
-- indexes (see 0003_inventory.sql). Pruning deletes finished requests, so a
-- booking may outlive the request that made it: only a request still present
-- must agree with its booking.
--
-- Set-based (hash joins and one pass over the seats), so it stays fast on
-- large inventories, and it must stay fast on a live system whose statistics
-- are stale (right after a burst of bookings, before autovacuum has analysed
-- the tables): taken seats are joined to the bookings table, not to the
-- materialised live_bookings (which has no statistics and let the planner
-- pick a nested loop over it, minutes on a large inventory), so that every
-- plan has an index seek on the bookings' primary key.
CREATE FUNCTION seatq.check_invariants(p_drained boolean DEFAULT false)
RETURNS TABLE (violation text, detail text)
LANGUAGE sql STABLE AS $$
    WITH live_bookings AS MATERIALIZED (
        SELECT * FROM seatq.bookings
        WHERE seatq.is_live(state, held_until)
    ), granted AS MATERIALIZED (
        SELECT b.id, b.event_id, b.state, b.held_until, g.seat
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
    -- a live hold's seats lapse when it does (extend moves both together)
    SELECT 'hold_expiry_mismatch',
           format('booking %s is held until %s but its event %s seat %s until %s', g.id, g.held_until,
                  g.event_id, g.seat, s.held_until)
    FROM granted g
    JOIN seatq.seats s ON s.event_id = g.event_id AND s.seat_no = g.seat
    WHERE s.booking_id = g.id AND s.held_until IS DISTINCT FROM g.held_until
    UNION ALL
    -- every taken seat belongs to a live booking of its event that lists it
    SELECT 'seat_without_booking',
           format('event %s seat %s is %s by booking %s', s.event_id, s.seat_no, s.state, s.booking_id)
    FROM seatq.seats s
    LEFT JOIN seatq.bookings b ON b.id = s.booking_id
    WHERE seatq.is_live(s.state, s.held_until)
      AND (b.id IS NULL OR NOT seatq.is_live(b.state, b.held_until)
           OR b.event_id <> s.event_id OR b.state::text <> s.state::text
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
