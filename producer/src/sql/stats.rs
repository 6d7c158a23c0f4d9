//! What operators and tests look at: seats, outcomes, latency, invariants.

/// Seats by state; a hold past its expiry counts as `lapsed` (free).
/// Through the function, which a producer login may call: it may not read
/// seatq.seats itself.
pub const SEATS_BY_STATE: &str = "SELECT state, seats FROM seatq.seats_by_state()";

/// Every invariant violation (see migrations: seatq.check_invariants).
pub const CHECK_INVARIANTS: &str = "SELECT violation, detail FROM seatq.check_invariants($1)";

/// Outcome counts of these requests, by kind and status or error code.
pub const OUTCOMES: &str = "
SELECT kind, coalesce(error_code, status::text) AS outcome, count(*)
FROM seatq.requests WHERE id = ANY($1)
GROUP BY 1, 2 ORDER BY 1, 2";

/// Enqueue-to-outcome latency of these finished requests, in milliseconds:
/// p50, p95, p99, max; and the span from first enqueue to last outcome.
pub const LATENCY: &str = "
SELECT percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
       max(ms) AS max,
       extract(epoch FROM max(finished_at) - min(created_at))::float8 AS span_secs,
       count(*) AS finished
FROM (
    SELECT created_at, finished_at, extract(epoch FROM finished_at - created_at)::float8 * 1000 AS ms
    FROM seatq.requests WHERE id = ANY($1) AND finished_at IS NOT NULL
) r";

/// Seats of one event by state (a lapsed hold counts as `lapsed`).
pub const EVENT_SEATS_BY_STATE: &str = "
SELECT CASE WHEN seatq.is_lapsed(state, held_until) THEN 'lapsed' ELSE state::text END AS state,
       count(*)
FROM seatq.seats WHERE event_id = $1 GROUP BY 1 ORDER BY 1";

/// Seats of event $1 taken: booked, or held and not lapsed.
pub const SEATS_TAKEN: &str = "
SELECT count(*) FROM seatq.seats
WHERE event_id = $1 AND seatq.is_live(state, held_until)";

/// Seats of event $1 granted, by the lists of its live bookings.
pub const SEATS_GRANTED: &str = "
SELECT coalesce(sum(cardinality(seats)), 0)::bigint FROM seatq.bookings
WHERE event_id = $1 AND seatq.is_live(state, held_until)";

/// Age in seconds of the oldest request that is due and still queued.
pub const OLDEST_QUEUED_AGE: &str = "
SELECT extract(epoch FROM now() - min(run_at))::float8
FROM seatq.requests WHERE status = 'queued' AND run_at <= now()";
