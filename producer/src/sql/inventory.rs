//! Events and seats.

/// Create an event by name, or return the existing one's id. DO NOTHING, not
/// DO UPDATE: updating the row would lock it, and every booking insert takes a
/// key-share lock on its event (the foreign key).
pub const ADD_EVENT: &str = "
WITH new AS (
    INSERT INTO seatq.events (name) VALUES ($1)
    ON CONFLICT (name) DO NOTHING
    RETURNING id
)
SELECT id FROM new
UNION ALL
SELECT id FROM seatq.events WHERE name = $1
LIMIT 1";

/// Give event $1 seats 1..=$2, $3 to a row, laid out like the classic airline
/// example: class 1 for seats 1-19, class 2 for 20-49, class 3 for 50 and up,
/// each class with a dearer front half and a cheaper back half. Idempotent.
pub const ADD_SEATS: &str = "
INSERT INTO seatq.seats (event_id, seat_no, class, price_cents, row_no, pos)
SELECT $1, s, c.class,
       CASE c.class
           WHEN 1 THEN CASE WHEN s <= 9 THEN 90000 ELSE 75000 END
           WHEN 2 THEN CASE WHEN s <= 34 THEN 40000 ELSE 32000 END
           ELSE CASE WHEN s <= 50 + ($2 - 50) / 2 THEN 15000 ELSE 12000 END
       END,
       (s - 1) / $3 + 1, (s - 1) % $3 + 1
FROM generate_series(1, $2) s
CROSS JOIN LATERAL (SELECT CASE WHEN s <= 19 THEN 1 WHEN s <= 49 THEN 2 ELSE 3 END AS class) c
ON CONFLICT DO NOTHING";
