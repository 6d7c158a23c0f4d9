//! The batch transaction's queue statements: claim requests, record their
//! outcomes, announce them.

/// Claim up to $1 due requests, best first, skipping those other workers hold.
/// The row locks are the claim: they last until the batch commits, and vanish
/// with the connection if the worker dies.
pub const CLAIM_BATCH: &str = "
SELECT id, producer, kind, payload, attempts, max_attempts
FROM seatq.requests
WHERE status = 'queued' AND run_at <= now()
ORDER BY priority DESC, run_at, id
LIMIT $1
FOR UPDATE SKIP LOCKED";

/// How a batch begins under `--strategy serializable`.
pub const BEGIN_SERIALIZABLE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";

/// Claim these requests again (a contention retry), if still queued and free.
pub const CLAIM_BY_IDS: &str = "
SELECT id, producer, kind, payload, attempts, max_attempts
FROM seatq.requests
WHERE id = ANY($1) AND status = 'queued'
ORDER BY priority DESC, run_at, id
FOR UPDATE SKIP LOCKED";

/// Write a batch's outcomes in one statement. $1 is a JSON array of outcome
/// objects. Returns, per finished request, its id, kind, outcome and
/// enqueue-to-outcome seconds. A request failed as `payload_too_large` keeps
/// `{}` for its payload, as the insert trigger leaves it
/// (migrations/0002_validation.sql): no row holds a payload over the limit.
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
        payload = CASE WHEN o.error_code = 'payload_too_large' THEN '{}'::jsonb ELSE r.payload END,
        attempts = r.attempts + CASE WHEN o.failed_attempt THEN 1 ELSE 0 END,
        contention_retries = r.contention_retries + coalesce(o.contended, 0),
        run_at = CASE WHEN o.retry_in_ms IS NULL THEN r.run_at
                      ELSE now() + o.retry_in_ms * interval '1 millisecond' END,
        started_at = coalesce(r.started_at, now()),
        finished_at = CASE WHEN o.status = 'queued' THEN NULL ELSE clock_timestamp() END
    FROM o
    -- The = ANY makes every plan an index seek on the primary key: joined on
    -- r.id = o.id alone, a generic plan made with stale statistics may hash a
    -- sequential scan of the whole table.
    WHERE r.id = o.id AND r.id = ANY (ARRAY(SELECT id FROM o))
    RETURNING r.id, r.kind, r.status, r.error_code, r.created_at, r.finished_at
)
SELECT id, kind, coalesce(error_code, status::text) AS outcome,
       extract(epoch FROM finished_at - created_at)::float8 AS latency_secs
FROM updated WHERE status <> 'queued'";

/// Wake the clients waiting on these finished requests ($1) on channel $2
/// ([`seatq_core::sql::notify::DONE_CHANNEL`]): one notification each, with the id as payload. Sent in a transaction of its
/// own, after the outcomes commit: PostgreSQL serialises the commits of all
/// transactions that NOTIFY (a database-wide lock held through the WAL
/// flush), so notifying inside the batch makes every worker's commit wait in
/// one line behind the others', and on a disk with a slow fsync it caps the
/// whole server at one batch per flush.
pub const NOTIFY_DONE: &str = "SELECT pg_notify($2, id::text) FROM unnest($1::bigint[]) AS id";
