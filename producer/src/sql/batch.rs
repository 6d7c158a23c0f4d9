//! Batches: the requests a file of parties was submitted as, read back by
//! the batch's name (`seatq.requests.batch`). Plain reads of the requests
//! table, so that they show a producer what it may read there and no more.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::Rows;
use super::queue::request_columns;
use crate::outcome::{RequestRecord, Status};

/// Which of these idempotency keys ($1) this producer has used
/// ([`KeysTaken`]; keys are per producer), and by which request
/// ([`KeyTaken`]): a seek of the key's unique index (producer, key) per key.
pub(crate) const KEYS_TAKEN: &str = "
SELECT idempotency_key, id FROM seatq.requests
WHERE producer = current_user AND idempotency_key = ANY($1::text[])";

/// The parameters of [`KEYS_TAKEN`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeysTaken<'a> {
    /// The keys to look up.
    pub(crate) keys: &'a [&'a str],
}

impl<'a> KeysTaken<'a> {
    pub(crate) fn query(&self) -> Rows<'a, KeyTaken> {
        sqlx::query_as(KEYS_TAKEN).bind(self.keys)
    }
}

/// A row of [`KEYS_TAKEN`]: a key in use.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct KeyTaken {
    pub(crate) idempotency_key: String,
    /// The request that has it.
    pub(crate) id: i64,
}

/// The requests of batch $1 ([`BatchCounts`]) by event and class (as their
/// payloads name them: JSON, decoded by the client, so that no payload a
/// producer wrote by hand can fail a cast here), status and error code: how
/// many, the seats their live bookings hold, when the first was enqueued and
/// the last finished ([`BatchCount`]).
pub(crate) const BATCH_COUNTS: &str = "
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

/// The parameters of [`BATCH_COUNTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchCounts<'a> {
    /// The batch's name.
    pub(crate) batch: &'a str,
}

impl<'a> BatchCounts<'a> {
    pub(crate) fn query(&self) -> Rows<'a, BatchCount> {
        sqlx::query_as(BATCH_COUNTS).bind(self.batch)
    }
}

/// A row of [`BATCH_COUNTS`]: the requests of a batch of one event and
/// class, status and error code.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct BatchCount {
    /// The payloads' `event`, as they give it (absent: NULL).
    pub(crate) event: Option<Value>,
    /// The payloads' `class`, as they give it (absent: NULL).
    pub(crate) class: Option<Value>,
    pub(crate) status: Status,
    pub(crate) error_code: Option<String>,
    /// How many requests.
    pub(crate) parties: i64,
    /// The seats their live bookings hold.
    pub(crate) seats: i64,
    pub(crate) first_enqueued: DateTime<Utc>,
    /// When the last of them finished (none yet: NULL).
    pub(crate) last_finished: Option<DateTime<Utc>>,
}

/// Every request of batch $1 ([`BatchRequests`]), in the order of the lines
/// they were first submitted from.
pub(crate) const BATCH_REQUESTS: &str =
    concat!("SELECT ", request_columns!(), " FROM seatq.requests WHERE batch = $1 ORDER BY batch_line, id");

/// The parameters of [`BATCH_REQUESTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchRequests<'a> {
    /// The batch's name.
    pub(crate) batch: &'a str,
}

impl BatchRequests<'_> {
    /// Binds a copy of the name, so that the query (and the stream of rows
    /// `Client::batch_results` returns) outlives the name it was given.
    pub(crate) fn query(&self) -> Rows<'static, RequestRecord> {
        sqlx::query_as(BATCH_REQUESTS).bind(self.batch.to_owned())
    }
}
