-- check_invariants() must stay fast on a live system whose statistics are
-- stale (right after a burst of bookings, before autovacuum has analysed the
-- tables). Joining every taken seat to the materialised live_bookings CTE
-- (which has no statistics) let the planner pick a nested loop over it: 150,000
-- seats times 60,000 bookings took minutes. Joining the bookings table
-- instead gives every plan an index seek on its primary key.
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
    LEFT JOIN seatq.bookings b ON b.id = s.booking_id
    WHERE (s.state = 'booked' OR (s.state = 'held' AND s.held_until > now()))
      AND (b.id IS NULL OR NOT (b.state = 'booked' OR (b.state = 'held' AND b.held_until > now()))
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
