//! The batch transaction's queue statements: claim requests, record their
//! outcomes, announce them.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use serde_json::Value;
use sqlx::types::Json;

use seatq_core::sql::route::{BindRoute as _, Routable};

use super::{Effect, Rows, Scalars};
use crate::record::Outcome;

/// Claim up to a batch of due requests ([`ClaimBatch`]), best first,
/// skipping those other workers hold. An event's line requests (those that
/// asked to wait) are claimed only with the event's line lock, tried, never
/// waited for: one batch at a time takes them, in order, and the others
/// skip them (migrations/0012_waiting_list.sql).
/// The row locks are the claim: they last until the batch commits, and vanish
/// with the connection if the worker dies.
pub const CLAIM_BATCH: &str = "
SELECT id, event_id, producer, kind, payload, token_hash, attempts, max_attempts, line
FROM seatq.requests
WHERE status = 'queued' AND run_at <= now() /*route event_id*/
  AND (NOT line OR pg_try_advisory_xact_lock(seatq.line_lock(event_id)))
ORDER BY priority DESC, run_at, id
LIMIT $1
FOR UPDATE SKIP LOCKED";
static ROUTED_CLAIM_BATCH: Routable = Routable::new(CLAIM_BATCH);

/// The parameters of [`CLAIM_BATCH`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaimBatch {
    /// Claim at most this many.
    pub limit: i64,
    /// Of this event's requests alone, on a database sharded by event
    /// ([`seatq_core::sql::route`]).
    pub route: Option<i64>,
}

impl ClaimBatch {
    pub fn query(&self) -> Rows<'static, Claimed> {
        sqlx::query_as(ROUTED_CLAIM_BATCH.text(self.route)).bind(self.limit).route(self.route)
    }
}

/// A request, as [`CLAIM_BATCH`] and [`CLAIM_BY_IDS`] claim it.
#[derive(Debug, sqlx::FromRow)]
pub struct Claimed {
    pub id: i64,
    /// The event it names (0 for none): what routes it on Citus.
    pub event_id: i64,
    /// Who enqueued it (the login that inserted it): its bookings are this producer's.
    pub producer: String,
    pub kind: String,
    pub payload: Value,
    /// The SHA-256 of the hold token it carried, if any (the token itself
    /// is never stored: migrations/0009_hold_tokens.sql).
    pub token_hash: Option<Vec<u8>>,
    /// Failed attempts so far.
    pub attempts: i32,
    pub max_attempts: i32,
    /// In its event's line (it asked to wait): claimed with the line's lock.
    pub line: bool,
}

/// Of the events whose line requests a batch claimed (each with the first
/// it claimed: [`OutOfLine`]), those with a queued line request before it:
/// the batch took the event's line lock after another batch let go of it,
/// in the middle of its claim, which had skipped the requests before. It
/// serves the head of that event's line instead ([`LINE_HEAD`]), so that
/// the line is served in order.
pub const OUT_OF_LINE: &str = "
SELECT c.event_id FROM unnest($1::bigint[], $2::bigint[]) AS c(event_id, first)
WHERE EXISTS (
    SELECT 1 FROM seatq.requests r
    WHERE r.event_id = c.event_id AND r.line AND r.status = 'queued' AND r.id < c.first /*route r.event_id*/)";
static ROUTED_OUT_OF_LINE: Routable = Routable::new(OUT_OF_LINE);

/// The parameters of [`OUT_OF_LINE`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OutOfLine<'a> {
    /// The events,
    pub events: &'a [i64],
    /// and the first line request of each the batch claimed.
    pub first: &'a [i64],
    /// All one event, as [`ClaimBatch::route`].
    pub route: Option<i64>,
}

impl<'a> OutOfLine<'a> {
    pub fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(ROUTED_OUT_OF_LINE.text(self.route)).bind(self.events).bind(self.first).route(self.route)
    }
}

/// The head of one event's line ([`LineHead`]): its first queued line
/// requests, by arrival, claimed by a batch that holds the event's line
/// lock and found it had claimed requests behind them ([`OUT_OF_LINE`]).
/// Rows the batch holds already come back too (a transaction's own locks
/// are not skipped).
pub const LINE_HEAD: &str = "
SELECT id, event_id, producer, kind, payload, token_hash, attempts, max_attempts, line
FROM seatq.requests
WHERE event_id = $1 AND line AND status = 'queued' AND run_at <= now() /*route event_id*/
ORDER BY id
LIMIT $2
FOR UPDATE SKIP LOCKED";
static ROUTED_LINE_HEAD: Routable = Routable::new(LINE_HEAD);

/// The parameters of [`LINE_HEAD`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LineHead {
    pub event: i64,
    /// Claim at most this many.
    pub limit: i64,
    /// The event again, on a database sharded by event.
    pub route: Option<i64>,
}

impl LineHead {
    pub fn query(&self) -> Rows<'static, Claimed> {
        sqlx::query_as(ROUTED_LINE_HEAD.text(self.route)).bind(self.event).bind(self.limit).route(self.route)
    }
}

/// How a batch begins under `--strategy serializable`.
pub const BEGIN_SERIALIZABLE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";

/// Claim these requests again ([`ClaimByIds`]: a contention retry), if still
/// queued and free.
pub const CLAIM_BY_IDS: &str = "
SELECT id, event_id, producer, kind, payload, token_hash, attempts, max_attempts, line
FROM seatq.requests
WHERE id = ANY($1) AND status = 'queued' /*route event_id*/
  AND (NOT line OR pg_try_advisory_xact_lock(seatq.line_lock(event_id)))
ORDER BY priority DESC, run_at, id
FOR UPDATE SKIP LOCKED";
static ROUTED_CLAIM_BY_IDS: Routable = Routable::new(CLAIM_BY_IDS);

/// The parameters of [`CLAIM_BY_IDS`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaimByIds<'a> {
    /// The requests' ids.
    pub ids: &'a [i64],
    /// Their one event, as [`ClaimBatch::route`].
    pub route: Option<i64>,
}

impl<'a> ClaimByIds<'a> {
    pub fn query(&self) -> Rows<'a, Claimed> {
        sqlx::query_as(ROUTED_CLAIM_BY_IDS.text(self.route)).bind(self.ids).route(self.route)
    }
}

/// Write a batch's outcomes in one statement ([`RecordOutcomes`]: as a JSON
/// array of outcome objects, `crate::record`'s). Returns, per finished request, its id, kind, outcome and
/// enqueue-to-outcome seconds ([`Finished`]). A request failed as `payload_too_large` keeps
/// `{}` for its payload, as the insert trigger leaves it
/// (migrations/0002_validation.sql): no row holds a payload over the limit.
pub const RECORD_OUTCOMES: &str = "
WITH o AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS o(
        id bigint, status seatq.request_status, result jsonb, error_code text, error_message text,
        retry_in_ms bigint, contended int, failed_attempt boolean)
), t AS (
    -- The times, as columns: Citus refuses a function that is not
    -- IMMUTABLE inside a CASE or COALESCE of an UPDATE. The batch's work is
    -- done when this statement begins.
    SELECT now() AS now, statement_timestamp() AS finished
), updated AS (
    UPDATE seatq.requests r SET
        status = o.status,
        result = o.result,
        error_code = o.error_code,
        error_message = o.error_message,
        payload = CASE WHEN o.error_code = 'payload_too_large' THEN '{}'::jsonb ELSE r.payload END,
        attempts = r.attempts + CASE WHEN o.failed_attempt THEN 1 ELSE 0 END,
        contention_retries = r.contention_retries + coalesce(o.contended, 0),
        run_at = CASE WHEN o.retry_in_ms IS NULL THEN r.run_at
                      ELSE seatq.secs_after(t.now, o.retry_in_ms / 1000.0) END,
        started_at = coalesce(r.started_at, t.now),
        finished_at = CASE WHEN o.status = 'queued' THEN NULL ELSE t.finished END
    FROM o, t
    -- The = ANY makes every plan an index seek on the primary key: joined on
    -- r.id = o.id alone, a generic plan made with stale statistics may hash a
    -- sequential scan of the whole table.
    WHERE r.id = o.id AND r.id = ANY (ARRAY(SELECT id FROM o)) /*route r.event_id*/
    RETURNING r.id, r.kind, r.status, r.error_code, r.created_at, r.finished_at
)
SELECT id, kind, coalesce(error_code, status::text) AS outcome,
       extract(epoch FROM finished_at - created_at)::float8 AS latency_secs
FROM updated WHERE status <> 'queued'";
static ROUTED_RECORD_OUTCOMES: Routable = Routable::new(RECORD_OUTCOMES);

/// The parameters of [`RECORD_OUTCOMES`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordOutcomes<'a> {
    /// One outcome a request processed, bound as one JSON array.
    pub outcomes: &'a [Outcome],
    /// Their requests' one event, as [`ClaimBatch::route`].
    pub route: Option<i64>,
}

impl<'a> RecordOutcomes<'a> {
    pub fn query(&self) -> Rows<'a, Finished> {
        sqlx::query_as(ROUTED_RECORD_OUTCOMES.text(self.route)).bind(Json(self.outcomes)).route(self.route)
    }
}

/// A request given a terminal outcome, as [`RECORD_OUTCOMES`] reports it.
#[derive(Debug, sqlx::FromRow)]
pub struct Finished {
    pub id: i64,
    pub kind: String,
    /// Its error code, or `succeeded`.
    pub outcome: String,
    /// From enqueue to outcome.
    pub latency_secs: f64,
}

/// Wake the clients waiting on these finished requests ([`NotifyDone`]):
/// one notification each, with the id as payload. Sent in a transaction of its
/// own, after the outcomes commit: PostgreSQL serialises the commits of all
/// transactions that NOTIFY (a database-wide lock held through the WAL
/// flush), so notifying inside the batch makes every worker's commit wait in
/// one line behind the others', and on a disk with a slow fsync it caps the
/// whole server at one batch per flush.
pub const NOTIFY_DONE: &str = "SELECT pg_notify($2, id::text) FROM unnest($1::bigint[]) AS id";

/// The parameters of [`NOTIFY_DONE`].
#[derive(Debug, Clone, Copy)]
pub struct NotifyDone<'a> {
    /// The finished requests' ids.
    pub ids: &'a [i64],
    /// The channel: [`seatq_core::sql::notify::DONE_CHANNEL`].
    pub channel: &'a str,
}

impl<'a> NotifyDone<'a> {
    pub fn query(&self) -> Effect<'a> {
        sqlx::query(NOTIFY_DONE).bind(self.ids).bind(self.channel)
    }
}
