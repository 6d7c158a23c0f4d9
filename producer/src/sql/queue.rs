//! The producer's side of the queue: enqueue, read requests back.

/// Enqueue one request (idempotent on the key). Binds kind, payload, key, priority.
pub const ENQUEUE: &str = "SELECT seatq.enqueue($1, $2, $3, $4)";

/// Enqueue many requests in one statement; returns their ids in input order.
/// Binds arrays of kind, payload, key, priority.
pub const ENQUEUE_MANY: &str = "
SELECT seatq.enqueue(t.kind, t.payload, t.key, t.priority) AS id
FROM unnest($1::text[], $2::jsonb[], $3::text[], $4::int[]) WITH ORDINALITY AS t(kind, payload, key, priority, ord)
ORDER BY t.ord";

/// The columns of a request as a producer reads them.
macro_rules! request_columns {
    () => {
        "id, kind, payload, idempotency_key, priority, status, attempts,
         contention_retries, run_at, created_at, started_at, finished_at, result, error_code, error_message"
    };
}

/// One request by id.
pub const GET_REQUEST: &str = concat!("SELECT ", request_columns!(), " FROM seatq.requests WHERE id = $1");

/// How many of these requests are still queued.
pub const COUNT_UNFINISHED: &str = "SELECT count(*) FROM seatq.requests WHERE id = ANY($1) AND status = 'queued'";

/// The current transaction's id, as text (it assigns one if none yet).
/// Taken just before COMMIT, so that if the connection is lost during COMMIT
/// the client can ask whether it committed.
pub const CURRENT_XACT_ID: &str = "SELECT pg_current_xact_id()::text";

/// Whether a transaction committed: `committed`, `aborted`, `in progress`,
/// or NULL when it is too old to tell. Binds the id as text.
pub const XACT_STATUS: &str = "SELECT pg_xact_status($1::xid8)";
