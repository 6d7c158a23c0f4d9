//! Batches: the requests a file of parties was submitted as, read back by
//! the batch's name (`seatq.requests.batch`). Plain reads of the requests
//! table, so that they show a producer what it may read there and no more.

use super::queue::request_columns;

/// Which of these idempotency keys ($1) this producer has used (keys are
/// per producer), and by which request: a seek of the key's unique index
/// (producer, key) per key.
pub const KEYS_TAKEN: &str = "
SELECT idempotency_key, id FROM seatq.requests
WHERE producer = current_user AND idempotency_key = ANY($1::text[])";

/// The requests of batch $1 by event and class (as their payloads name them:
/// JSON, decoded by the client, so that no payload a producer wrote by hand
/// can fail a cast here), status and error code: how many, the seats their
/// live bookings hold, when the first was enqueued and the last finished.
pub const BATCH_COUNTS: &str = "
SELECT payload->'event' AS event, payload->'class' AS class, status, error_code,
       count(*) AS parties,
       coalesce(sum(jsonb_array_length(result->'seats'))
                FILTER (WHERE jsonb_typeof(result->'seats') = 'array'
                          AND result->>'state' IN ('held', 'booked')), 0)::bigint AS seats,
       min(created_at) AS first_enqueued, max(finished_at) AS last_finished
FROM seatq.requests
WHERE batch = $1
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4";

/// Every request of batch $1, in the order of the lines they were first
/// submitted from.
pub const BATCH_REQUESTS: &str =
    concat!("SELECT ", request_columns!(), " FROM seatq.requests WHERE batch = $1 ORDER BY batch_line, id");
