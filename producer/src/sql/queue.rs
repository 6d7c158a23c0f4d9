//! The request queue: enqueue, claim, record outcomes, read them back.

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
        "id, kind, payload, idempotency_key, priority, status::text AS status, attempts,
         contention_retries, run_at, created_at, started_at, finished_at, result, error_code, error_message"
    };
}

/// One request by id.
pub const GET_REQUEST: &str = concat!("SELECT ", request_columns!(), " FROM seatq.requests WHERE id = $1");

/// How many of these requests are still queued.
pub const COUNT_UNFINISHED: &str = "SELECT count(*) FROM seatq.requests WHERE id = ANY($1) AND status = 'queued'";

/// Claim up to $1 due requests, best first, skipping those other workers hold.
/// The row locks are the claim: they last until the batch commits, and vanish
/// with the connection if the worker dies.
pub const CLAIM_BATCH: &str = "
SELECT id, kind, payload, attempts, max_attempts
FROM seatq.requests
WHERE status = 'queued' AND run_at <= now()
ORDER BY priority DESC, run_at, id
LIMIT $1
FOR UPDATE SKIP LOCKED";

/// How a batch begins under `--strategy serializable`.
pub const BEGIN_SERIALIZABLE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";

/// Claim these requests again (a contention retry), if still queued and free.
pub const CLAIM_BY_IDS: &str = "
SELECT id, kind, payload, attempts, max_attempts
FROM seatq.requests
WHERE id = ANY($1) AND status = 'queued'
ORDER BY priority DESC, run_at, id
FOR UPDATE SKIP LOCKED";

/// Write a batch's outcomes in one statement. $1 is a JSON array of outcome
/// objects. Returns, per finished request, its id, kind, outcome and
/// enqueue-to-outcome seconds.
pub const RECORD_OUTCOMES: &str = "
WITH o AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS o(
        id bigint, status text, result jsonb, error_code text, error_message text,
        retry_in_ms bigint, contended int, failed_attempt boolean)
), updated AS (
    UPDATE seatq.requests r SET
        status = o.status::seatq.request_status,
        result = o.result,
        error_code = o.error_code,
        error_message = o.error_message,
        attempts = r.attempts + CASE WHEN o.failed_attempt THEN 1 ELSE 0 END,
        contention_retries = r.contention_retries + coalesce(o.contended, 0),
        run_at = CASE WHEN o.retry_in_ms IS NULL THEN r.run_at
                      ELSE now() + o.retry_in_ms * interval '1 millisecond' END,
        started_at = coalesce(r.started_at, now()),
        finished_at = CASE WHEN o.status = 'queued' THEN NULL ELSE clock_timestamp() END
    FROM o
    -- The = ANY makes every plan an index seek on the primary key: joined on
    -- r.id = o.id alone, a generic plan made with stale statistics hashed a
    -- sequential scan of the whole table (2.4 ms a batch in the benchmark).
    WHERE r.id = o.id AND r.id = ANY (ARRAY(SELECT id FROM o))
    RETURNING r.id, r.kind, r.status, r.error_code, r.created_at, r.finished_at
)
SELECT id, kind, coalesce(error_code, status::text) AS outcome,
       extract(epoch FROM finished_at - created_at)::float8 AS latency_secs
FROM updated WHERE status <> 'queued'";

/// Wake the clients waiting on these finished requests ($1) on channel $2
/// ([`DONE_CHANNEL`]): one notification each, with the id as payload. Sent in a transaction of its
/// own, after the outcomes commit: PostgreSQL serialises the commits of all
/// transactions that NOTIFY (a database-wide lock held through the WAL
/// flush), so notifying inside the batch made every worker's commit wait in
/// one line: most waits sampled under the hot benchmark were there, and on a
/// disk with a slow fsync it caps the whole server at one batch per flush.
pub const NOTIFY_DONE: &str = "SELECT pg_notify($2, id::text) FROM unnest($1::bigint[]) AS id";

/// The NOTIFY channel a finished request's id is sent on.
pub const DONE_CHANNEL: &str = "seatq_done";
/// The NOTIFY channel that tells workers new requests are waiting.
pub const NEW_CHANNEL: &str = "seatq_new";

/// The current transaction's id, as text (it assigns one if none yet).
/// Taken just before COMMIT, so that if the connection is lost during COMMIT
/// the client can ask whether it committed.
pub const CURRENT_XACT_ID: &str = "SELECT pg_current_xact_id()::text";

/// Whether a transaction committed: `committed`, `aborted`, `in progress`,
/// or NULL when it is too old to tell. Binds the id as text.
pub const XACT_STATUS: &str = "SELECT pg_xact_status($1::xid8)";
