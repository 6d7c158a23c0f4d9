//! The producer's side of the queue: enqueue, read requests back.

/// Enqueue one request (idempotent on the key). Binds kind, payload, key,
/// priority, run_at (NULL: now), and batch, ref and line (NULL outside a batch).
pub const ENQUEUE: &str = "SELECT seatq.enqueue($1, $2, $3, $4, $5, $6, $7, $8)";

/// Enqueue many requests in one statement; returns their ids in input order.
/// Binds arrays of kind, payload, key, priority, run_at (NULL: now), batch,
/// ref and line (NULL outside a batch).
pub const ENQUEUE_MANY: &str = "
SELECT seatq.enqueue(t.kind, t.payload, t.key, t.priority, t.run_at, t.batch, t.batch_ref, t.batch_line) AS id
FROM unnest($1::text[], $2::jsonb[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[], $8::int[])
     WITH ORDINALITY AS t(kind, payload, key, priority, run_at, batch, batch_ref, batch_line, ord)
ORDER BY t.ord";

/// Which requests of a batch (arrays of kind $1, payload $2, key $3) reuse
/// an idempotency key for another kind or payload: the key's first use is
/// the stored request of this producer (keys are per producer) if there is
/// one, else the batch's first line with it.
/// Returns each conflicting line's position (from 1), its key and the id of
/// the stored request it conflicts with (NULL for a line of the batch).
/// One pass over the batch, not one per line: each key's first line comes
/// from a window over the batch sorted by key (one sort), the stored
/// request from one seek of the key's unique index per line.
pub const IDEMPOTENCY_CONFLICTS: &str = "
WITH b AS (
    SELECT t.kind, t.payload, t.key, t.ord,
           first_value(t.ord) OVER w AS first_ord,
           first_value(t.kind) OVER w AS first_kind,
           first_value(t.payload) OVER w AS first_payload
    FROM unnest($1::text[], $2::jsonb[], $3::text[]) WITH ORDINALITY AS t(kind, payload, key, ord)
    WHERE t.key IS NOT NULL
    WINDOW w AS (PARTITION BY t.key ORDER BY t.ord)
)
SELECT b.ord AS position, b.key, stored.id AS first_id,
       CASE WHEN stored.id IS NULL THEN b.first_ord END AS first_position
FROM b
LEFT JOIN seatq.requests stored ON stored.producer = current_user AND stored.idempotency_key = b.key
WHERE CASE WHEN stored.id IS NOT NULL
           THEN (stored.kind, stored.payload) IS DISTINCT FROM (b.kind, b.payload)
           ELSE (b.first_kind, b.first_payload) IS DISTINCT FROM (b.kind, b.payload) END
ORDER BY b.ord";

/// The columns of a request as a producer reads them.
macro_rules! request_columns {
    () => {
        "id, kind, payload, idempotency_key, priority, status, attempts,
         contention_retries, run_at, created_at, started_at, finished_at, result, error_code, error_message,
         batch, batch_ref, batch_line"
    };
}
pub(crate) use request_columns;

/// One request by id.
pub const GET_REQUEST: &str = concat!("SELECT ", request_columns!(), " FROM seatq.requests WHERE id = $1");

/// How many of these requests are still queued.
pub const COUNT_UNFINISHED: &str = "SELECT count(*) FROM seatq.requests WHERE id = ANY($1) AND status = 'queued'";

/// Of the requests waited for ($1), those finished (with their row) and
/// those gone (no row: `id` NULL), each with the id asked for as `wanted`;
/// requests still queued are left out. One statement for every waiter.
pub const FINISHED_OR_GONE: &str = concat!(
    "SELECT w.wanted, r.* FROM unnest($1::bigint[]) AS w(wanted)
     LEFT JOIN LATERAL (SELECT ",
    request_columns!(),
    " FROM seatq.requests WHERE id = w.wanted) r ON true
     WHERE r.id IS NULL OR r.status <> 'queued'"
);

/// The current transaction's id, as text (it assigns one if none yet).
/// Taken just before COMMIT, so that if the connection is lost during COMMIT
/// the client can ask whether it committed.
pub const CURRENT_XACT_ID: &str = "SELECT pg_current_xact_id()::text";

/// Whether a transaction committed: `committed`, `aborted`, `in progress`,
/// or NULL when it is too old to tell. Binds the id as text.
pub const XACT_STATUS: &str = "SELECT pg_xact_status($1::xid8)";
