//! The producer's side of the queue: enqueue, read requests back.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row as _};

use super::{Rows, Scalars};
use crate::outcome::{Place, RequestRecord, Status};
use sqlx::types::Json;

/// Enqueue one request ([`Enqueue`]; idempotent on the key); returns its id.
/// Binds kind, payload, key, priority, run_at (NULL: now), and batch, ref and
/// line (NULL outside a batch).
pub(crate) const ENQUEUE: &str = "SELECT seatq.enqueue($1, $2, $3, $4, $5, $6, $7, $8)";

/// The parameters of [`ENQUEUE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Enqueue<'a> {
    pub(crate) kind: &'a str,
    pub(crate) payload: &'a Value,
    /// The idempotency key, if any.
    pub(crate) key: Option<&'a str>,
    pub(crate) priority: i32,
    /// When it is due (none: now).
    pub(crate) run_at: Option<DateTime<Utc>>,
    /// The batch's name, the party's ref and its line (none outside a batch).
    pub(crate) batch: Option<&'a str>,
    pub(crate) batch_ref: Option<&'a str>,
    pub(crate) batch_line: Option<i32>,
}

impl<'a> Enqueue<'a> {
    pub(crate) fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(ENQUEUE)
            .bind(self.kind)
            .bind(self.payload)
            .bind(self.key)
            .bind(self.priority)
            .bind(self.run_at)
            .bind(self.batch)
            .bind(self.batch_ref)
            .bind(self.batch_line)
    }
}

/// Enqueue many requests in one statement ([`EnqueueMany`]); returns their
/// ids in input order. Binds arrays of kind, payload, key, priority, run_at
/// (NULL: now), batch, ref and line (NULL outside a batch).
pub(crate) const ENQUEUE_MANY: &str = "
SELECT seatq.enqueue(t.kind, t.payload, t.key, t.priority, t.run_at, t.batch, t.batch_ref, t.batch_line) AS id
FROM unnest($1::text[], $2::jsonb[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[], $8::int[])
     WITH ORDINALITY AS t(kind, payload, key, priority, run_at, batch, batch_ref, batch_line, ord)
ORDER BY t.ord";

/// The parameters of [`ENQUEUE_MANY`]: one array a column, one element a
/// request, all of the same length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnqueueMany<'a> {
    pub(crate) kinds: &'a [&'a str],
    pub(crate) payloads: &'a [Value],
    /// Idempotency keys (none: no key).
    pub(crate) keys: &'a [Option<&'a str>],
    pub(crate) priorities: &'a [i32],
    /// When each is due (none: now).
    pub(crate) run_at: &'a [Option<DateTime<Utc>>],
    /// Batch names, refs and lines (none outside a batch).
    pub(crate) batches: &'a [Option<&'a str>],
    pub(crate) batch_refs: &'a [Option<&'a str>],
    pub(crate) batch_lines: &'a [Option<i32>],
}

impl<'a> EnqueueMany<'a> {
    pub(crate) fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(ENQUEUE_MANY)
            .bind(self.kinds)
            .bind(self.payloads)
            .bind(self.keys)
            .bind(self.priorities)
            .bind(self.run_at)
            .bind(self.batches)
            .bind(self.batch_refs)
            .bind(self.batch_lines)
    }
}

/// Which requests of a batch ([`IdempotencyConflicts`]: arrays of kind $1,
/// payload $2, key $3) reuse
/// an idempotency key for another kind or payload: the key's first use is
/// the stored request of this producer (keys are per producer) if there is
/// one, else the batch's first line with it.
/// A stored request is compared as stored: its payload without the token,
/// the token by its hash (migrations/0009_hold_tokens.sql).
/// Returns each conflicting line's position (from 1), its key and the id of
/// the stored request it conflicts with (NULL for a line of the batch)
/// ([`KeyConflict`]).
/// One pass over the batch, not one per line: each key's first line comes
/// from a window over the batch sorted by key (one sort), the stored
/// request from one seek of the key's unique index per line.
pub(crate) const IDEMPOTENCY_CONFLICTS: &str = "
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
           THEN (stored.kind, stored.payload, stored.token_hash)
                IS DISTINCT FROM (b.kind, seatq.without_token(b.payload), seatq.token_hash(b.payload ->> 'token'))
           ELSE (b.first_kind, b.first_payload) IS DISTINCT FROM (b.kind, b.payload) END
ORDER BY b.ord";

/// The parameters of [`IDEMPOTENCY_CONFLICTS`]: one array a column, one
/// element a line of the batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdempotencyConflicts<'a> {
    pub(crate) kinds: &'a [&'a str],
    pub(crate) payloads: &'a [Value],
    /// Idempotency keys (none: the line has none, and conflicts with nothing).
    pub(crate) keys: &'a [Option<&'a str>],
}

impl<'a> IdempotencyConflicts<'a> {
    pub(crate) fn query(&self) -> Rows<'a, KeyConflict> {
        sqlx::query_as(IDEMPOTENCY_CONFLICTS).bind(self.kinds).bind(self.payloads).bind(self.keys)
    }
}

/// A row of [`IDEMPOTENCY_CONFLICTS`]: a line whose key was first used for
/// another kind or payload.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct KeyConflict {
    /// The line's place in the batch, from 1.
    pub(crate) position: i64,
    pub(crate) key: String,
    /// The stored request that first used the key,
    pub(crate) first_id: Option<i64>,
    /// or else the batch's line that did, from 1.
    pub(crate) first_position: Option<i64>,
}

/// The columns of a request as a producer reads them.
macro_rules! request_columns {
    () => {
        "id, kind, payload, idempotency_key, priority, status, attempts,
         contention_retries, run_at, created_at, started_at, finished_at, result, error_code, error_message,
         batch, batch_ref, batch_line, line"
    };
}
pub(crate) use request_columns;

/// A line request's place ([`PlaceOf`]; `seatq.place`): in its event's line
/// while queued, on the waiting list while waiting; NULL otherwise. A
/// statement without a table: on Citus the function runs on the
/// coordinator, each of its reads routed to the event's node.
pub(crate) const PLACE_OF: &str = "SELECT seatq.place($1, $2, $3, true)";

/// The parameters of [`PLACE_OF`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlaceOf {
    pub(crate) event: i64,
    pub(crate) request: i64,
    pub(crate) status: Status,
}

impl PlaceOf {
    pub(crate) fn query(&self) -> Scalars<'static, Option<Json<Place>>> {
        sqlx::query_scalar(PLACE_OF).bind(self.event).bind(self.request).bind(self.status)
    }
}

/// One request by id ([`GetRequest`]).
pub(crate) const GET_REQUEST: &str = concat!("SELECT ", request_columns!(), " FROM seatq.requests WHERE id = $1");

/// The parameters of [`GET_REQUEST`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct GetRequest {
    pub(crate) id: i64,
}

impl GetRequest {
    pub(crate) fn query(&self) -> Rows<'static, RequestRecord> {
        sqlx::query_as(GET_REQUEST).bind(self.id)
    }
}

/// One request by id with the hash of the hold token it carried
/// ([`GetRequestHeld`]), to be read only by whoever holds that token.
pub(crate) const GET_REQUEST_HELD: &str =
    concat!("SELECT ", request_columns!(), ", token_hash FROM seatq.requests WHERE id = $1");

/// The parameters of [`GET_REQUEST_HELD`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct GetRequestHeld {
    pub(crate) id: i64,
}

impl GetRequestHeld {
    pub(crate) fn query(&self) -> Rows<'static, HeldRequest> {
        sqlx::query_as(GET_REQUEST_HELD).bind(self.id)
    }
}

/// A row of [`GET_REQUEST_HELD`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct HeldRequest {
    #[sqlx(flatten)]
    pub(crate) record: RequestRecord,
    pub(crate) token_hash: Option<Vec<u8>>,
}

/// The hash of the hold token booking $1 answers to ([`BookingTokenHash`]):
/// no row when there is no such booking (or it is another producer's), a
/// NULL when it was made without a token.
pub(crate) const BOOKING_TOKEN_HASH: &str = "SELECT token_hash FROM seatq.bookings WHERE id = $1";

/// The parameters of [`BOOKING_TOKEN_HASH`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BookingTokenHash {
    pub(crate) booking: i64,
}

impl BookingTokenHash {
    pub(crate) fn query(&self) -> Scalars<'static, Option<Vec<u8>>> {
        sqlx::query_scalar(BOOKING_TOKEN_HASH).bind(self.booking)
    }
}

/// Of the requests waited for ($1: [`FinishedOrGone`]), those finished (with
/// their row) and those gone (no row: `id` NULL), each with the id asked for
/// as `wanted` ([`WaitedFor`]); requests still queued (or waiting for seats
/// on a waiting list) are left out. One
/// statement for every waiter. (The requests are read by `= ANY`, then
/// joined to the ids: on Citus, where they may be on any node, a join of
/// the table to the ids' list is refused.)
pub(crate) const FINISHED_OR_GONE: &str = concat!(
    "WITH r AS (SELECT ",
    request_columns!(),
    " FROM seatq.requests WHERE id = ANY($1))
     SELECT w.wanted, r.* FROM unnest($1::bigint[]) AS w(wanted)
     LEFT JOIN r ON r.id = w.wanted
     WHERE r.id IS NULL OR r.status NOT IN ('queued', 'waiting')"
);

/// The parameters of [`FINISHED_OR_GONE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct FinishedOrGone<'a> {
    /// The requests waited for.
    pub(crate) ids: &'a [i64],
}

impl<'a> FinishedOrGone<'a> {
    pub(crate) fn query(&self) -> Rows<'a, WaitedFor> {
        sqlx::query_as(FINISHED_OR_GONE).bind(self.ids)
    }
}

/// A row of [`FINISHED_OR_GONE`]: a request waited for, finished or gone.
#[derive(Debug)]
pub(crate) struct WaitedFor {
    /// The id asked for.
    pub(crate) wanted: i64,
    /// Its row, finished; none if there is no such request.
    pub(crate) record: Option<Box<RequestRecord>>,
}

/// By hand, not derived: the request's columns are NULL for a request gone
/// (the LEFT JOIN found no row), and read as a [`RequestRecord`] otherwise.
impl<'r> FromRow<'r, PgRow> for WaitedFor {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let wanted: i64 = row.try_get("wanted")?;
        let found: Option<i64> = row.try_get("id")?;
        let record = match found {
            Some(_) => Some(Box::new(RequestRecord::from_row(row)?)),
            None => None,
        };
        Ok(WaitedFor { wanted, record })
    }
}

/// Which server this is, as a COMMIT's fate can be asked of: the cluster's
/// system identifier and the timeline it writes on (a promoted standby
/// shares the identifier and starts a new timeline). NULL on a standby, which
/// writes nothing, and where the login may not read them (a server that
/// revoked `pg_control_system()` from PUBLIC): never an error, since it is
/// read inside the transaction it is about.
macro_rules! server_identity {
    () => {
        "CASE WHEN NOT pg_is_in_recovery()
                   AND has_function_privilege('pg_control_system()', 'execute')
                   AND has_function_privilege('pg_current_wal_lsn()', 'execute')
              THEN (SELECT system_identifier FROM pg_control_system())::text || '/'
                   || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END"
    };
}

/// The current transaction's id, as text (it assigns one if none yet), and
/// the server's identity ([`Commit`]). Taken just before COMMIT, so that if
/// the connection is lost during COMMIT the client can ask the same server
/// whether it committed.
pub(crate) const CURRENT_XACT_ID: &str =
    concat!("SELECT pg_current_xact_id()::text AS xid, ", server_identity!(), " AS server");

/// A transaction about to commit, and where.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Commit {
    pub(crate) xid: String,
    /// `None` where the login may not read the server's identity.
    pub(crate) server: Option<String>,
}

/// The parameters of [`CURRENT_XACT_ID`]: none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CurrentXactId;

impl CurrentXactId {
    pub(crate) fn query(&self) -> Rows<'static, Commit> {
        sqlx::query_as(CURRENT_XACT_ID)
    }
}

/// Whether a transaction committed (`committed`, `aborted`, `in progress`,
/// or NULL when it is too old to tell), asked only of the server that ran it:
/// `status` is NULL too when this server is not that one (after a failover a
/// promoted standby reuses transaction ids, and would answer for one it
/// never saw) or cannot say which it is; `server` says which this is, and
/// `standby` whether it is one.
pub(crate) const XACT_STATUS: &str = concat!(
    "SELECT CASE WHEN s.server = $2 THEN pg_xact_status($1::xid8)::text END AS status, s.server,
            pg_is_in_recovery() AS standby
     FROM (SELECT ",
    server_identity!(),
    " AS server) s"
);

/// The parameters of [`XACT_STATUS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct XactStatus<'a> {
    /// The transaction's id, as [`CURRENT_XACT_ID`] gave it.
    pub(crate) xid: &'a str,
    /// The server it ran on, as [`CURRENT_XACT_ID`] gave it.
    pub(crate) server: &'a str,
}

/// What [`XACT_STATUS`] says.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Fate {
    pub(crate) status: Option<String>,
    pub(crate) server: Option<String>,
    pub(crate) standby: bool,
}

impl<'a> XactStatus<'a> {
    pub(crate) fn query(&self) -> Rows<'a, Fate> {
        sqlx::query_as(XACT_STATUS).bind(self.xid).bind(self.server)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use sqlx::postgres::PgPool;
    use sqlx::{Connection as _, Execute as _};

    use super::{IDEMPOTENCY_CONFLICTS, IdempotencyConflicts};
    use crate::{Client, Error, NewRequest, Request, SeatRequest, db};

    /// The server to make a throwaway database on: the end-to-end tests'
    /// (`SEATQ_TEST_DATABASE_URL`, else `DATABASE_URL`), else PostgreSQL on
    /// 127.0.0.1:5432 as `postgres`.
    fn server_url() -> String {
        std::env::var("SEATQ_TEST_DATABASE_URL")
            .or_else(|_| std::env::var("DATABASE_URL"))
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
    }

    /// [`IDEMPOTENCY_CONFLICTS`]'s plan reads the batch once (a window over
    /// it), not once per line: run on a file of 3,000 lines, three to a key,
    /// a stored request's key among them, with `EXPLAIN ANALYZE`, bound
    /// through [`IdempotencyConflicts`]. On a database of its own, migrated
    /// by [`db::migrate`] and dropped after. Fails if no server answers and
    /// `CI` is set; else says so and passes.
    #[tokio::test]
    async fn the_conflict_check_reads_the_batch_once() {
        let server = db::options(&server_url()).expect("a database URL");
        let mut admin = match db::admin(&server).await {
            Ok(admin) => admin,
            Err(e) if std::env::var_os("CI").is_some() => panic!("no database server (CI is set): {e}"),
            Err(e) => {
                eprintln!("skipped: no database server to explain the conflict check on ({e}); set CI to fail instead");
                return;
            }
        };
        // Named as the end-to-end tests name theirs, so that their clean-up
        // drops it if this process dies before it does.
        let name = format!("seatq_test_{}_conflict_plan", std::process::id());
        db::drop_database(&mut admin, &name).await.expect("drop a leftover database");
        db::create_database(&mut admin, &name, None).await.expect("create the test database");
        let plan = explain_conflicts(&server.clone().database(&name)).await;
        db::drop_database(&mut admin, &name).await.expect("drop the test database");
        let _ = admin.close().await;
        let plan = plan.expect("explain");

        fn batch_scans(node: &Value, found: &mut Vec<(String, i64)>) {
            let kind = node["Node Type"].as_str().unwrap_or_default();
            if ["Function Scan", "CTE Scan", "WindowAgg"].contains(&kind) {
                found.push((kind.to_string(), node["Actual Loops"].as_i64().unwrap_or(-1)));
            }
            for child in node["Plans"].as_array().into_iter().flatten() {
                batch_scans(child, found);
            }
        }
        let mut scans = Vec::new();
        batch_scans(&plan[0]["Plan"], &mut scans);
        assert!(scans.iter().any(|(kind, _)| kind == "Function Scan"), "{plan}");
        assert!(scans.iter().all(|(_, loops)| *loops == 1), "a scan of the batch repeated: {scans:?}");
    }

    /// The schema laid, an event and a stored request made, the plan of
    /// the conflict check of a long file, as `EXPLAIN (ANALYZE, FORMAT JSON)`
    /// gives it.
    async fn explain_conflicts(options: &sqlx::postgres::PgConnectOptions) -> Result<Value, Error> {
        let pool = PgPool::connect_with(options.clone()).await?;
        let plan = async {
            db::migrate(&pool).await?;
            let client = Client::from_pool(pool.clone());
            let ev = client.add_event("E", 20, 6).await?;
            let keyed = |customer: &str, key: &str| NewRequest {
                idempotency_key: Some(key.to_string()),
                ..Request::Book(SeatRequest::new(ev, 1, 1, customer)).into()
            };
            client.enqueue(keyed("zed", "order-stored")).await?;
            // 3,000 lines, three to a key: the third of every hundredth key
            // asks for another customer; line 1,500 reuses the stored
            // request's key for another customer.
            let batch: Vec<NewRequest> = (0..3000)
                .map(|i| {
                    let customer = if i % 300 == 2 { "other".to_string() } else { format!("c{}", i / 3) };
                    let key = if i == 1500 { "order-stored".to_string() } else { format!("order-{}", i / 3) };
                    keyed(&customer, &key)
                })
                .collect();
            let kinds: Vec<&str> = batch.iter().map(|n| n.request.kind()).collect();
            let payloads: Vec<Value> = batch.iter().map(|n| n.request.payload()).collect();
            let keys: Vec<Option<&str>> = batch.iter().map(|n| n.idempotency_key.as_deref()).collect();
            // The statement's own arguments, bound by its params struct.
            let mut conflicts = IdempotencyConflicts { kinds: &kinds, payloads: &payloads, keys: &keys }.query();
            let arguments = conflicts.take_arguments().map_err(sqlx::Error::Encode)?.expect("bound arguments");
            let explain = format!("EXPLAIN (ANALYZE, FORMAT JSON) {IDEMPOTENCY_CONFLICTS}");
            Ok::<Value, Error>(sqlx::query_scalar_with(sqlx::AssertSqlSafe(explain), arguments).fetch_one(&pool).await?)
        }
        .await;
        pool.close().await;
        plan
    }
}
