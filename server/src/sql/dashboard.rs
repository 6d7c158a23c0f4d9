//! What the dashboard shows beyond the producer library's reads: throughput
//! and latency buckets, dead requests, seats per event.

/// The database answers.
pub const PING: &str = "SELECT 1";

/// The server's clock, which the buckets are cut by.
pub const NOW: &str = "SELECT now()";

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
