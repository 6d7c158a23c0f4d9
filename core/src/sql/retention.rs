//! Retention of finished requests: the worker prunes them in the
//! background, `seatq prune` on demand.

/// Delete up to $2 succeeded or failed requests that finished more than $1
/// seconds ago. Dead requests are kept: an operator may still retry them.
/// (`status <> 'queued'` lets the partial index `requests_finished` serve it.)
pub const PRUNE_FINISHED: &str = "
WITH old AS (
    SELECT id FROM seatq.requests
    WHERE status <> 'queued' AND status <> 'dead'
      AND finished_at < now() - $1::float8 * interval '1 second'
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM seatq.requests r USING old WHERE r.id = old.id";
