//! What operators and tests look at.

/// Requests by status.
pub const REQUESTS_BY_STATUS: &str =
    "SELECT status::text, count(*) FROM seatq.requests GROUP BY status ORDER BY status";

/// Age in seconds of the oldest request that is due and still queued.
pub const OLDEST_QUEUED_AGE: &str = "
SELECT extract(epoch FROM now() - min(run_at))::float8
FROM seatq.requests WHERE status = 'queued' AND run_at <= now()";

/// Seats by state; a hold past its expiry counts as `lapsed` (free).
pub const SEATS_BY_STATE: &str = "
SELECT CASE WHEN state = 'held' AND held_until <= now() THEN 'lapsed' ELSE state::text END AS state,
       count(*)
FROM seatq.seats GROUP BY 1 ORDER BY 1";

/// Every invariant violation (see migrations: seatq.check_invariants).
pub const CHECK_INVARIANTS: &str = "SELECT violation, detail FROM seatq.check_invariants($1)";
