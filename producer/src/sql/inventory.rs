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
