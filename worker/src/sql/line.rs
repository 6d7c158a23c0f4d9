//! The line and the waiting list (migrations/0012_waiting_list.sql): joining
//! the list, and serving it where seats come free.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use seatq_core::sql::route::{BindRoute as _, Routable};

use super::{Rows, Scalars};

/// Put requests of one event on its waiting list and serve the list at once
/// ([`JoinLine`]; `seatq.join_line`): per request, its status after
/// ([`Joined`]).
pub const JOIN_LINE: &str = "SELECT request_id, status FROM seatq.join_line($1, $2, $3)";

/// The parameters of [`JOIN_LINE`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JoinLine<'a> {
    /// The event,
    pub event: i64,
    /// its requests that join (claimed by the batch, each refused for want
    /// of seats and asking to wait),
    pub requests: &'a [i64],
    /// and each one's customer in normal form, where that is not the name
    /// as given (who the per-customer limit counts).
    pub customer_keys: &'a [Option<&'a str>],
}

impl<'a> JoinLine<'a> {
    pub fn query(&self) -> Rows<'a, Joined> {
        sqlx::query_as(JOIN_LINE).bind(self.event).bind(self.requests).bind(self.customer_keys)
    }
}

/// A row of [`JOIN_LINE`]: a request and what became of it.
#[derive(Debug, sqlx::FromRow)]
pub struct Joined {
    pub request_id: i64,
    /// waiting, succeeded (served at once), failed (its wait was over),
    /// `contended` (another transaction holds the event's line) or `closed`
    /// (the event's waiting list is closed).
    pub status: String,
}

/// Serve the waiting lists of some events ([`ServeLines`];
/// `seatq.serve_line`), one statement for all, in the order given (sorted,
/// so that two batches waiting for the same lines take them in one order):
/// the parties served or ended in all; a list another transaction holds,
/// when the call does not wait for it, counts none.
pub const SERVE_LINES: &str =
    "SELECT coalesce(sum(greatest(seatq.serve_line(e, $2), 0)), 0)::bigint FROM unnest($1::bigint[]) AS u(e)";

/// The parameters of [`SERVE_LINES`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeLines<'a> {
    /// The events, sorted.
    pub events: &'a [i64],
    /// Wait for each event's line lock (a cancel: whoever holds it commits
    /// within a batch), rather than pass over a list held elsewhere (the
    /// sweeper: it comes again).
    pub wait: bool,
}

impl<'a> ServeLines<'a> {
    pub fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(SERVE_LINES).bind(self.events).bind(self.wait)
    }
}

/// The events with a waiting list (at most 1,000 a pass), for the sweeper
/// to serve ([`EventsWithWaiting`]): ends the waits that are over, and
/// hands over the seats its sweep freed.
pub const EVENTS_WITH_WAITING: &str =
    "SELECT DISTINCT event_id FROM seatq.waiting WHERE true /*route event_id*/ LIMIT 1000";
static ROUTED_EVENTS_WITH_WAITING: Routable = Routable::new(EVENTS_WITH_WAITING);

/// The parameters of [`EVENTS_WITH_WAITING`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EventsWithWaiting {
    /// This event alone (whether it has one), on a database sharded by
    /// event ([`seatq_core::sql::route`]).
    pub route: Option<i64>,
}

impl EventsWithWaiting {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(ROUTED_EVENTS_WITH_WAITING.text(self.route)).route(self.route)
    }
}
