//! What the dashboard shows beyond the producer library's reads: throughput
//! and latency buckets, dead requests, seats per event. Each statement has
//! its params struct and row struct beside it, in the shape of the
//! producer's and the worker's (`seatq_worker::sql` says it in full).

use chrono::{DateTime, Utc};
use seatq_core::sql::{Effect, Rows, Scalars};
use serde::{Deserialize, Serialize};

/// The database answers.
pub const PING: &str = "SELECT 1";

/// The parameters of [`PING`]: none.
#[derive(Debug, Clone, Copy)]
pub struct Ping;

impl Ping {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(PING)
    }
}

/// The server's clock, which the buckets are cut by.
pub const NOW: &str = "SELECT now()";

/// The parameters of [`NOW`]: none.
#[derive(Debug, Clone, Copy)]
pub struct Now;

impl Now {
    pub fn query(&self) -> Scalars<'static, DateTime<Utc>> {
        sqlx::query_scalar(NOW)
    }
}

/// Requests finished in the last $2 seconds, in buckets of $1 seconds (cut
/// at multiples of $1 since the Unix epoch): per bucket, how many, and the
/// median and 95th percentile of their enqueue-to-outcome latency in
/// milliseconds. `status <> 'queued'` lets the partial index
/// `requests_finished` serve the range.
pub const THROUGHPUT: &str = "
SELECT at, count(*) AS finished,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95_ms
FROM (
    SELECT date_bin($1 * interval '1 second', finished_at, timestamptz 'epoch') AS at,
           extract(epoch FROM finished_at - created_at)::float8 * 1000 AS ms
    FROM seatq.requests
    WHERE status <> 'queued'
      AND finished_at >= date_bin($1 * interval '1 second', now(), timestamptz 'epoch') - ($2 - $1) * interval '1 second'
) r
GROUP BY at ORDER BY at";

/// The parameters of [`THROUGHPUT`].
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Seconds per bucket ($1).
    pub bucket_secs: i64,
    /// Seconds back from now ($2).
    pub window_secs: i64,
}

impl Throughput {
    pub fn query(&self) -> Rows<'static, Bucket> {
        sqlx::query_as(THROUGHPUT).bind(self.bucket_secs).bind(self.window_secs)
    }
}

/// Finished requests of one bucket.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Bucket {
    /// The bucket's start.
    pub at: DateTime<Utc>,
    /// Requests finished in it.
    pub finished: i64,
    /// Enqueue-to-outcome latency of those, median and 95th percentile, in
    /// milliseconds.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// The latest $1 events (or only event $2), each with its seats sold, held
/// (live holds), free (available, or held past the hold) and not for sale.
pub const EVENT_SEATS: &str = "
SELECT e.id, e.name, e.venue, e.starts_at,
       seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal,
       c.seats, c.sold, c.held, c.free, c.not_for_sale
FROM (
    SELECT * FROM seatq.events WHERE $2::bigint IS NULL OR id = $2 ORDER BY id DESC LIMIT $1
) e
CROSS JOIN LATERAL (
    SELECT count(*) AS seats,
           count(*) FILTER (WHERE s.state = 'booked') AS sold,
           count(*) FILTER (WHERE s.state = 'held' AND seatq.is_live(s.state, s.held_until)) AS held,
           count(*) FILTER (WHERE seatq.is_free(s.state, s.held_until)) AS free,
           count(*) FILTER (WHERE s.state = 'blocked') AS not_for_sale
    FROM seatq.seats s WHERE s.event_id = e.id
) c
ORDER BY e.id";

/// The parameters of [`EVENT_SEATS`].
#[derive(Debug, Clone, Copy)]
pub struct EventSeatsOf {
    /// How many of the latest events ($1).
    pub limit: i64,
    /// Only this event ($2), or every one.
    pub event: Option<i64>,
}

impl EventSeatsOf {
    pub fn query(&self) -> Rows<'static, EventSeats> {
        sqlx::query_as(EVENT_SEATS).bind(self.limit).bind(self.event)
    }
}

/// An event with its seats sold, held and free (`sql::dashboard::EVENT_SEATS`).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct EventSeats {
    pub id: i64,
    pub name: String,
    pub venue: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    /// Why sales refuse now (`not_on_sale`, `sales_closed`), or none.
    pub refusal: Option<String>,
    pub seats: i64,
    pub sold: i64,
    pub held: i64,
    pub free: i64,
    pub not_for_sale: i64,
}
