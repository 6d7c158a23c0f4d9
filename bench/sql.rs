//! The benchmark's own statements (`seatq-bench`): bulk set-up and the
//! measurements it reports. Nothing here runs in production.

/// Enqueue many requests in one statement, the way a bulk producer would
/// (no idempotency keys). Binds kinds, payloads and priorities as arrays.
/// Each request's event is given (on Citus it decides the node).
pub const ENQUEUE: &str = "
INSERT INTO seatq.requests (event_id, kind, payload, priority)
SELECT seatq.event_of(t.payload), t.kind, t.payload, t.priority
FROM unnest($1::text[], $2::jsonb[], $3::smallint[]) AS t(kind, payload, priority)";

/// A deep queue's history: $1 requests that finished (sold out) over the past
/// week, inserted directly. Run with triggers off (session_replication_role),
/// since they are not new requests.
pub const INSERT_HISTORY: &str = "
INSERT INTO seatq.requests (event_id, kind, payload, status, error_code, error_message, created_at, started_at,
                            finished_at)
SELECT 1 + g % 3000, 'book',
       jsonb_build_object('event', 1 + g % 3000, 'class', 3, 'party', 2, 'customer', 'past-' || g),
       'failed', 'sold_out', '0 seat(s) of class 3 left',
       now() - (g % 604800) * interval '1 second',
       now() - (g % 604800) * interval '1 second',
       now() - (g % 604800) * interval '1 second' + interval '5 milliseconds'
FROM generate_series(1, $1) g";

/// Skip triggers for this transaction (superuser only).
pub const TRIGGERS_OFF: &str = "SET LOCAL session_replication_role = replica";

/// The highest id of a finished request (0 when none): the backlog and the
/// run's requests come after it.
pub const LAST_FINISHED_ID: &str = "SELECT coalesce(max(id), 0) FROM seatq.requests WHERE status <> 'queued'";

/// The seeded events.
pub const EVENTS: &str = "SELECT id FROM seatq.events ORDER BY id";

/// The database's clock.
pub const NOW: &str = "SELECT clock_timestamp()";

/// Requests of this run (id > $1) still queued.
pub const QUEUED: &str = "SELECT count(*) FROM seatq.requests WHERE status = 'queued' AND id > $1";

/// 1 if any request of this run (id > $1) is still queued, else 0.
pub const ANY_QUEUED: &str = "
SELECT count(*) FROM (SELECT 1 FROM seatq.requests WHERE status = 'queued' AND id > $1 LIMIT 1) q";

/// Registered workers.
pub const WORKERS: &str = "SELECT count(*) FROM seatq.workers";

/// Server processes serving this database's workers, to read their CPU time.
pub const WORKER_BACKENDS: &str = "
SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'seatq-worker'";

/// Of these finished requests, the holds that succeeded: booking, customer.
pub const SUCCEEDED_HOLDS: &str = "
SELECT (result ->> 'booking')::bigint, payload ->> 'customer'
FROM seatq.requests
WHERE id = ANY($1) AND status = 'succeeded' AND kind = 'hold'";

/// Summary of this run's requests (id > $1), timed from $2: count, last
/// outcome, contention retries, and enqueue-to-outcome latency percentiles in
/// milliseconds (from when the request was available: created, or $2 if it
/// was already waiting); and the medians of its two parts: waiting in the
/// queue until the transaction that finished it began (`started_at`; one
/// begun before the request was available counts from then), and that
/// transaction's time up to the outcome.
pub const SUMMARY: &str = "
SELECT count(*) AS requests,
       max(answered) AS last_finished,
       coalesce(sum(contention_retries), 0)::bigint AS contention_retries,
       percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
       max(ms) AS max,
       percentile_cont(0.50) WITHIN GROUP (ORDER BY queue_ms) AS queue_p50,
       percentile_cont(0.50) WITHIN GROUP (ORDER BY batch_ms) AS batch_p50
FROM (
    SELECT answered, contention_retries,
           extract(epoch FROM answered - available)::float8 * 1000 AS ms,
           extract(epoch FROM greatest(started_at, available) - available)::float8 * 1000 AS queue_ms,
           extract(epoch FROM answered - greatest(started_at, available))::float8 * 1000 AS batch_ms
    FROM (SELECT *, greatest(created_at, $2) AS available,
                 coalesce(finished_at, CASE WHEN status = 'waiting' THEN started_at END) AS answered
          FROM seatq.requests WHERE id > $1) q
) r";

/// The line scenario's requests of the burst (id > $1): in arrival order,
/// when the batch that answered each began (given seats, refused, or put on
/// the waiting list; a request handed seats later keeps the time it
/// joined). Requests of one batch share it: they are decided in claim order.
pub const LINE_ANSWERS: &str = "
SELECT started_at AS answered FROM seatq.requests
WHERE id > $1 AND line AND status <> 'queued'
ORDER BY id";

/// Seats handed to waiting parties (bookings of line requests made after
/// their request joined the list): how long after the seat came free (its
/// previous booking cancelled, or its hold lapsed) the party held it, in
/// milliseconds: the count, the median and the 99th percentile.
pub const HANDOVERS: &str = "
WITH handed AS (
    SELECT b.id, b.event_id, b.created_at, s.seat
    FROM seatq.bookings b
    JOIN seatq.requests r ON r.id = b.request_id AND r.event_id = b.event_id
    CROSS JOIN LATERAL unnest(b.seats) AS s(seat)
    WHERE r.id > $1 AND r.line AND b.created_at > r.started_at
), freed AS (
    SELECT h.created_at,
           (SELECT max(CASE WHEN p.state = 'cancelled' THEN p.updated_at ELSE p.held_until END)
            FROM seatq.bookings p
            WHERE p.event_id = h.event_id AND h.seat = ANY (p.seats) AND p.id < h.id
              AND p.state IN ('cancelled', 'expired', 'held')) AS freed_at
    FROM handed h
), ms AS (
    SELECT greatest(extract(epoch FROM created_at - freed_at)::float8 * 1000, 0) AS ms FROM freed WHERE freed_at IS NOT NULL
)
SELECT count(*) AS seats, percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
FROM ms";

/// The line scenario's drain: when the batch that answered the last of its
/// line requests (id > $1) began (`started_at`: a request put on the waiting
/// list keeps it, while a hand-over later sets its `finished_at`), and the
/// requests answered by then: the line's, and the confirms and cancels
/// finished meanwhile.
pub const LINE_DRAIN: &str = "
WITH l AS (SELECT max(started_at) AS last FROM seatq.requests WHERE id > $1 AND line)
SELECT count(*) FILTER (WHERE r.line OR r.finished_at <= l.last), l.last
FROM seatq.requests r, l WHERE r.id > $1 GROUP BY l.last";

/// Parties still on the waiting list at the end.
pub const STILL_WAITING: &str = "SELECT count(*) FROM seatq.requests WHERE status = 'waiting'";

/// This run's outcomes (id > $1) by kind and status or error code.
pub const OUTCOMES: &str = "
SELECT kind, coalesce(error_code, status::text) AS outcome, count(*)
FROM seatq.requests WHERE id > $1
GROUP BY 1, 2 ORDER BY 1, 2";

/// Seats taken (booked or live holds) and seats granted (by the lists of live
/// bookings): the two must agree.
pub const SEATS_TAKEN_AND_GRANTED: &str = "
SELECT (SELECT count(*) FROM seatq.seats
        WHERE seatq.is_live(state, held_until)) AS taken,
       (SELECT coalesce(sum(cardinality(seats)), 0)::bigint FROM seatq.bookings
        WHERE seatq.is_live(state, held_until)) AS granted";

/// Bookings by state.
pub const BOOKINGS_BY_STATE: &str = "SELECT state, count(*) FROM seatq.bookings GROUP BY 1 ORDER BY 1";

/// `--citus`: the seatq schema of the coordinator's database, dropped
/// before each run's seeding.
pub const DROP_SCHEMA: &str = "DROP SCHEMA IF EXISTS seatq CASCADE";

/// `--citus`: the cluster's active nodes, the coordinator first.
pub const CITUS_NODES: &str =
    "SELECT nodename::text, nodeport FROM pg_dist_node WHERE isactive AND noderole = 'primary' ORDER BY groupid";

/// This session's server process.
pub const BACKEND_PID: &str = "SELECT pg_backend_pid()";
