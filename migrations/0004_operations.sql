-- Operations: the worker registry, retention, autovacuum.

-- Each worker process registers itself and heartbeats; a row whose heartbeat
-- is old belongs to a dead process and is dropped by the live ones.
CREATE TABLE seatq.workers (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL,
    host         text NOT NULL,
    pid          int NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    settings     jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- Retention: finished requests by age, pruned in small batches.
CREATE INDEX requests_finished ON seatq.requests (finished_at) WHERE status <> 'queued';

-- The queue table churns (every request is updated once and later deleted):
-- vacuum it after 2% of it changed rather than the default 20%, so dead
-- tuples do not pile up at the head of the claim index.
ALTER TABLE seatq.requests SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE seatq.seats SET (autovacuum_vacuum_scale_factor = 0.05);

REVOKE ALL ON seatq.workers FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON seatq.workers TO seatq_worker;
GRANT DELETE ON seatq.requests TO seatq_worker;
GRANT SELECT ON seatq.workers TO seatq_producer;
GRANT ALL ON seatq.workers TO seatq_admin;

-- Pruning deletes finished requests, so a booking may outlive the request
-- that made it: only a request still present must agree with its booking.
CREATE OR REPLACE FUNCTION seatq.check_invariants(p_drained boolean DEFAULT false)
RETURNS TABLE (violation text, detail text)
LANGUAGE sql STABLE AS $$
    WITH live_bookings AS (
        SELECT * FROM seatq.bookings
        WHERE state = 'booked' OR (state = 'held' AND held_until > now())
    ), live_seats AS (
        SELECT * FROM seatq.seats
        WHERE state = 'booked' OR (state = 'held' AND held_until > now())
    )
    SELECT 'seat_in_two_bookings',
           format('event %s seat %s is in bookings %s', event_id, seat, array_agg(id ORDER BY id))
    FROM (SELECT id, event_id, unnest(seats) AS seat FROM live_bookings) granted
    GROUP BY event_id, seat HAVING count(*) > 1
    UNION ALL
    SELECT 'booking_seats_mismatch',
           format('booking %s lists %s seats but owns %s', b.id, cardinality(b.seats), owned.n)
    FROM live_bookings b
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM seatq.seats s
        WHERE s.event_id = b.event_id AND s.seat_no = ANY (b.seats)
          AND s.booking_id = b.id AND s.state::text = b.state::text
    ) owned
    WHERE owned.n <> cardinality(b.seats)
    UNION ALL
    SELECT 'seat_without_booking',
           format('event %s seat %s is %s by booking %s', s.event_id, s.seat_no, s.state, s.booking_id)
    FROM live_seats s
    WHERE NOT EXISTS (
        SELECT 1 FROM live_bookings b
        WHERE b.id = s.booking_id AND b.state::text = s.state::text AND s.seat_no = ANY (b.seats))
    UNION ALL
    SELECT 'booking_without_outcome',
           format('booking %s was made by request %s, which is %s', b.id, b.request_id, r.status)
    FROM seatq.bookings b
    JOIN seatq.requests r ON r.id = b.request_id
    WHERE r.status <> 'succeeded'
       OR r.kind NOT IN ('hold', 'book')
       OR (r.result ->> 'booking')::bigint IS DISTINCT FROM b.id
    UNION ALL
    SELECT 'outcome_without_booking',
           format('request %s reports booking %s, which it did not make', r.id, r.result ->> 'booking')
    FROM seatq.requests r
    WHERE r.status = 'succeeded' AND r.kind IN ('hold', 'book')
      AND NOT EXISTS (
        SELECT 1 FROM seatq.bookings b
        WHERE b.id = (r.result ->> 'booking')::bigint AND b.request_id = r.id
          AND cardinality(b.seats) = jsonb_array_length(r.result -> 'seats'))
    UNION ALL
    SELECT 'request_not_terminal', format('request %s is still queued', r.id)
    FROM seatq.requests r
    WHERE p_drained AND r.status = 'queued'
$$;
