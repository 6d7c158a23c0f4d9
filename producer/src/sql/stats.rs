//! What operators and tests look at: seats, outcomes, latency, invariants.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use serde::{Deserialize, Serialize};

use super::{Rows, Scalars};

/// Seats by state ([`SeatsByState`]); a hold past its expiry counts as `lapsed` (free).
/// Through the function, which a producer login may call: it may not read
/// seatq.seats itself.
pub(crate) const SEATS_BY_STATE: &str = "SELECT state, seats FROM seatq.seats_by_state()";

/// The parameters of [`SEATS_BY_STATE`]: none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatsByState;

impl SeatsByState {
    pub(crate) fn query(&self) -> Rows<'static, SeatsInState> {
        sqlx::query_as(SEATS_BY_STATE)
    }
}

/// A row of [`SEATS_BY_STATE`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct SeatsInState {
    /// `available`, `held`, `lapsed`, `booked` or `blocked`.
    pub(crate) state: String,
    pub(crate) seats: i64,
}

/// Every invariant violation ([`CheckInvariants`]; see migrations:
/// seatq.check_invariants).
pub(crate) const CHECK_INVARIANTS: &str = "SELECT violation, detail FROM seatq.check_invariants($1)";

/// The parameters of [`CHECK_INVARIANTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckInvariants {
    /// A request still queued counts as a violation.
    pub(crate) drained: bool,
}

impl CheckInvariants {
    pub(crate) fn query(&self) -> Rows<'static, Violation> {
        sqlx::query_as(CHECK_INVARIANTS).bind(self.drained)
    }
}

// The row of CHECK_INVARIANTS.
/// One broken invariant, as reported by `seatq.check_invariants()`.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct Violation {
    pub violation: String,
    pub detail: String,
}

/// Outcome counts of these requests ([`Outcomes`]), by kind and status or error code.
pub(crate) const OUTCOMES: &str = "
SELECT kind, coalesce(error_code, status::text) AS outcome, count(*)
FROM seatq.requests WHERE id = ANY($1)
GROUP BY 1, 2 ORDER BY 1, 2";

/// The parameters of [`OUTCOMES`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcomes<'a> {
    /// The requests' ids.
    pub(crate) ids: &'a [i64],
}

impl<'a> Outcomes<'a> {
    pub(crate) fn query(&self) -> Rows<'a, OutcomeCount> {
        sqlx::query_as(OUTCOMES).bind(self.ids)
    }
}

/// A row of [`OUTCOMES`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct OutcomeCount {
    pub(crate) kind: String,
    /// The error code, or else the status.
    pub(crate) outcome: String,
    /// How many of the requests.
    pub(crate) count: i64,
}

/// Enqueue-to-outcome latency of these finished requests ([`LatencyOf`]), in
/// milliseconds: p50, p95, p99, max; and the span from first enqueue to last
/// outcome ([`Latency`]).
pub(crate) const LATENCY: &str = "
SELECT percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
       max(ms) AS max,
       extract(epoch FROM max(finished_at) - min(created_at))::float8 AS span_secs,
       count(*) AS finished
FROM (
    SELECT created_at, finished_at, extract(epoch FROM finished_at - created_at)::float8 * 1000 AS ms
    FROM seatq.requests WHERE id = ANY($1) AND finished_at IS NOT NULL
) r";

/// The parameters of [`LATENCY`] (named apart from its row, [`Latency`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LatencyOf<'a> {
    /// The requests' ids.
    pub(crate) ids: &'a [i64],
}

impl<'a> LatencyOf<'a> {
    pub(crate) fn query(&self) -> Rows<'a, Latency> {
        sqlx::query_as(LATENCY).bind(self.ids)
    }
}

// The row of LATENCY.
/// Enqueue-to-outcome latency of a set of requests, in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, sqlx::FromRow)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// Seconds from the first enqueue to the last outcome.
    pub span_secs: Option<f64>,
    /// How many of the requests are finished.
    pub finished: i64,
}

/// Seats of one event by state ([`EventSeatsByState`]; a lapsed hold counts as `lapsed`).
pub(crate) const EVENT_SEATS_BY_STATE: &str = "
SELECT CASE WHEN seatq.is_lapsed(state, held_until) THEN 'lapsed' ELSE state::text END AS state,
       count(*)
FROM seatq.seats WHERE event_id = $1 GROUP BY 1 ORDER BY 1";

/// The parameters of [`EVENT_SEATS_BY_STATE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventSeatsByState {
    pub(crate) event: i64,
}

impl EventSeatsByState {
    pub(crate) fn query(&self) -> Rows<'static, EventSeatsInState> {
        sqlx::query_as(EVENT_SEATS_BY_STATE).bind(self.event)
    }
}

/// A row of [`EVENT_SEATS_BY_STATE`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct EventSeatsInState {
    /// `available`, `held`, `lapsed`, `booked` or `blocked`.
    pub(crate) state: String,
    /// How many of the event's seats are in it.
    pub(crate) count: i64,
}

/// Seats of event $1 taken ([`SeatsTaken`]): booked, or held and not lapsed.
pub(crate) const SEATS_TAKEN: &str = "
SELECT count(*) FROM seatq.seats
WHERE event_id = $1 AND seatq.is_live(state, held_until)";

/// The parameters of [`SEATS_TAKEN`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatsTaken {
    pub(crate) event: i64,
}

impl SeatsTaken {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(SEATS_TAKEN).bind(self.event)
    }
}

/// Seats of event $1 granted ([`SeatsGranted`]), by the lists of its live bookings.
pub(crate) const SEATS_GRANTED: &str = "
SELECT coalesce(sum(cardinality(seats)), 0)::bigint FROM seatq.bookings
WHERE event_id = $1 AND seatq.is_live(state, held_until)";

/// The parameters of [`SEATS_GRANTED`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatsGranted {
    pub(crate) event: i64,
}

impl SeatsGranted {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(SEATS_GRANTED).bind(self.event)
    }
}

/// Age in seconds of the oldest request that is due and still queued
/// ([`OldestQueuedAge`]; NULL when none is).
pub(crate) const OLDEST_QUEUED_AGE: &str = "
SELECT extract(epoch FROM now() - min(run_at))::float8
FROM seatq.requests WHERE status = 'queued' AND run_at <= now()";

/// The parameters of [`OLDEST_QUEUED_AGE`]: none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OldestQueuedAge;

impl OldestQueuedAge {
    pub(crate) fn query(&self) -> Scalars<'static, Option<f64>> {
        sqlx::query_scalar(OLDEST_QUEUED_AGE)
    }
}
