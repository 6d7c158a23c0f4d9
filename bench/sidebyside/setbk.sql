-- The set-based reference with a booking row for every request booked, and
-- results as bare as the reference's (the booking and its seat numbers):
-- setfair.sql without the venue's names in the result. Needs setfair.sql's
-- columns and table.
CREATE OR REPLACE FUNCTION process_set_bk(k int) RETURNS int LANGUAGE sql AS $$
WITH claimed AS (
  SELECT id, flight, class, qty, passenger FROM requests
  WHERE status = 0 ORDER BY id LIMIT k FOR UPDATE SKIP LOCKED
), need AS (
  SELECT flight, class, sum(qty)::int AS total FROM claimed GROUP BY flight, class
), cand AS (
  SELECT s.flight, s.class, s.seat, s.price, s.row_no, s.pos, s.section, s.row_label, s.label,
         row_number() OVER (PARTITION BY s.flight, s.class ORDER BY s.price, s.seat) AS rn
  FROM need n CROSS JOIN LATERAL (
    SELECT flight, class, seat, price, row_no, pos, section, row_label, label FROM seats
    WHERE flight = n.flight AND class = n.class AND state = 0
    ORDER BY price, seat LIMIT n.total FOR UPDATE SKIP LOCKED) s
), got AS (
  SELECT flight, class, count(*) AS n FROM cand GROUP BY flight, class
), req AS (
  SELECT c.*, sum(qty) OVER (PARTITION BY flight, class ORDER BY id) AS upto FROM claimed c
), ok AS (
  SELECT r.* FROM req r JOIN got g USING (flight, class) WHERE r.upto <= g.n
), assign AS (
  SELECT o.id, o.passenger, c.* FROM ok o
  JOIN cand c ON c.flight = o.flight AND c.class = o.class
   AND c.rn > o.upto - o.qty AND c.rn <= o.upto
), per_req AS (  -- each booking's id drawn here, so that no update joins the inserted bookings
  SELECT nextval('bookings_id_seq') AS bid, x.* FROM (
    SELECT id, flight, passenger, array_agg(seat ORDER BY seat) AS seats, sum(price * 100)::bigint AS total,
           NULL::jsonb AS places
    FROM assign GROUP BY id, flight, passenger) x
), bk AS (
  INSERT INTO bookings (id, event_id, customer, state, seats, total_cents, held_until, request_id, producer)
  OVERRIDING SYSTEM VALUE
  SELECT bid, flight, 'c' || passenger, 'held', seats, total, now() + interval '10 minutes', id, 'postgres' FROM per_req
  RETURNING id
), upd_seats AS (
  UPDATE seats s SET state = 1, holder = a.passenger, request_id = a.id, booking_id = a.bid,
         held_until = now() + interval '10 minutes'
  FROM (SELECT bid, id, flight, passenger, unnest(seats) AS seat FROM per_req) a
  WHERE s.flight = a.flight AND s.seat = a.seat RETURNING a.id
), upd_req AS (
  UPDATE requests r SET status = CASE WHEN p.id IS NULL THEN 3 ELSE 2 END,
         finished_at = now(),
         result = CASE WHEN p.id IS NULL THEN '{"error":"sold_out"}'::jsonb
                       ELSE jsonb_build_object('booking', p.bid, 'seats', p.seats) END
  FROM claimed c LEFT JOIN per_req p ON p.id = c.id
  WHERE r.id = c.id RETURNING 1
)
SELECT count(*)::int + (SELECT count(*)::int * 0 FROM upd_seats) + (SELECT count(*)::int * 0 FROM bk) FROM upd_req;
$$;
