-- The set-based reference (the shared bench's setbased.sql) with the writes
-- seatq makes for every request besides: a booking row, and (with
-- full_results) a result that names every seat as the venue does, in
-- seatq's shape; without, a result as bare as the reference's (the booking
-- and its seat numbers). It shows what those writes cost the reference
-- itself, where no application runs around them (docs/benchmarks.md).
-- Loaded after ceiling.sql and setbased.sql into the side-by-side's SQL
-- template by the copy bench/sidebyside-copy.sh makes.
--
-- The seats gain the venue's names and a booking; the requests' passengers
-- stand for customers.
ALTER TABLE seats ADD COLUMN row_no int, ADD COLUMN pos int, ADD COLUMN section text,
  ADD COLUMN row_label text, ADD COLUMN label text, ADD COLUMN booking_id bigint;
UPDATE seats SET row_no = 1 + (seat - 1) / 6, pos = 1 + (seat - 1) % 6,
  section = CASE class WHEN 1 THEN 'First' WHEN 2 THEN 'Business' ELSE 'Cabin' END,
  row_label = (1 + (seat - 1) / 6)::text,
  label = (1 + (seat - 1) / 6)::text || chr(65 + (seat - 1) % 6);
CREATE TABLE bookings (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id bigint NOT NULL, customer text NOT NULL,
  state text NOT NULL, seats int[] NOT NULL, total_cents bigint NOT NULL, held_until timestamptz,
  request_id bigint NOT NULL, producer text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now());
CREATE OR REPLACE FUNCTION process_set_booked(k int, full_results boolean) RETURNS int LANGUAGE sql AS $$
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
           jsonb_agg(jsonb_build_object('seat', seat, 'class', class, 'row', row_no, 'pos', pos,
                     'price_cents', (price * 100)::int, 'section', section, 'row_label', row_label, 'label', label)
                     ORDER BY seat) FILTER (WHERE full_results) AS places
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
                       WHEN full_results
                       THEN jsonb_build_object('booking', p.bid, 'event', p.flight, 'customer', 'c' || p.passenger,
                            'state', 'held', 'total_cents', p.total, 'seats', p.places)
                       ELSE jsonb_build_object('booking', p.bid, 'seats', p.seats) END
  FROM claimed c LEFT JOIN per_req p ON p.id = c.id
  WHERE r.id = c.id RETURNING 1
)
-- (A data-modifying WITH runs whether or not it is read.)
SELECT count(*)::int FROM upd_req;
$$;
