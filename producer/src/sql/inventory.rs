//! Events and seats.
//!
//! Each statement's params struct and row struct are beside it (see
//! [`crate::sql`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Effect, Rows, Scalars};
use crate::outcome::{SeatAvailability, WaitlistOrder};
use crate::venue::NewEvent;

/// Create events by name ($1, in order: [`AddEvents`]), or find the existing ones; returns
/// their ids in the order given. DO NOTHING, not DO UPDATE: updating an
/// event row would lock it against the bookings being made on it.
pub(crate) const ADD_EVENTS: &str = "
WITH names AS (
    SELECT name, ord FROM unnest($1::text[]) WITH ORDINALITY AS n(name, ord)
), new AS (
    INSERT INTO seatq.events (name)
    SELECT name FROM names ORDER BY ord
    ON CONFLICT (name) DO NOTHING
    RETURNING id, name
)
SELECT coalesce(new.id, old.id) AS id
FROM names
LEFT JOIN new ON new.name = names.name
LEFT JOIN seatq.events old ON old.name = names.name
ORDER BY names.ord";

/// The parameters of [`ADD_EVENTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AddEvents<'a> {
    /// The events' names.
    pub(crate) names: &'a [String],
}

impl<'a> AddEvents<'a> {
    pub(crate) fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(ADD_EVENTS).bind(self.names)
    }
}

/// Give each event of $1 seats 1..=$2, $3 to a row ([`AddSeats`]), laid out like the classic
/// airline example: class 1 for seats 1-19, class 2 for 20-49, class 3 for 50
/// and up, each class with a dearer front half and a cheaper back half. Every
/// seat is in section "Cabin", its row labelled with the row number and the
/// seat with row and letter ("12C"), or its number when a row is wider than
/// the alphabet. Idempotent.
pub(crate) const ADD_SEATS: &str = "
INSERT INTO seatq.seats (event_id, seat_no, class, price_cents, row_no, pos, section, row_label, label)
SELECT e.id, s, c.class,
       CASE c.class
           WHEN 1 THEN CASE WHEN s <= 9 THEN 90000 ELSE 75000 END
           WHEN 2 THEN CASE WHEN s <= 34 THEN 40000 ELSE 32000 END
           ELSE CASE WHEN s <= 50 + ($2 - 50) / 2 THEN 15000 ELSE 12000 END
       END,
       (s - 1) / $3 + 1, (s - 1) % $3 + 1,
       'Cabin', ((s - 1) / $3 + 1)::text,
       CASE WHEN $3 <= 26 THEN ((s - 1) / $3 + 1)::text || chr(65 + (s - 1) % $3) ELSE s::text END
FROM unnest($1::bigint[]) AS e(id)
CROSS JOIN generate_series(1, $2) s
CROSS JOIN LATERAL (SELECT CASE WHEN s <= 19 THEN 1 WHEN s <= 49 THEN 2 ELSE 3 END AS class) c
ON CONFLICT DO NOTHING";

/// The parameters of [`ADD_SEATS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AddSeats<'a> {
    /// The events' ids.
    pub(crate) events: &'a [i64],
    /// Seats per event, numbered from 1.
    pub(crate) seats: i32,
    /// Seats to a row (at least 1).
    pub(crate) per_row: i32,
}

impl<'a> AddSeats<'a> {
    pub(crate) fn query(&self) -> Effect<'a> {
        sqlx::query(ADD_SEATS).bind(self.events).bind(self.seats).bind(self.per_row)
    }
}

/// Create an imported event ([`ImportEvent`]): name, venue, start, on sale
/// from, until (by default its start), per-customer limit. Fails on a name
/// already used.
pub(crate) const IMPORT_EVENT: &str = "
INSERT INTO seatq.events (name, venue, starts_at, sales_from, sales_until, per_customer)
VALUES ($1, $2, $3, $4, coalesce($5, $3), $6)
RETURNING id";

/// The parameters of [`IMPORT_EVENT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImportEvent<'a> {
    pub(crate) name: &'a str,
    pub(crate) venue: Option<&'a str>,
    pub(crate) starts_at: Option<DateTime<Utc>>,
    /// On sale from (none: at once).
    pub(crate) sales_from: Option<DateTime<Utc>>,
    /// On sale until (none: until `starts_at`).
    pub(crate) sales_until: Option<DateTime<Utc>>,
    /// At most this many live seats per customer (none: no limit).
    pub(crate) per_customer: Option<i32>,
}

impl<'a> ImportEvent<'a> {
    pub(crate) fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(IMPORT_EVENT)
            .bind(self.name)
            .bind(self.venue)
            .bind(self.starts_at)
            .bind(self.sales_from)
            .bind(self.sales_until)
            .bind(self.per_customer)
    }
}

/// The id of the event named $1 ([`EventByName`]).
pub(crate) const EVENT_BY_NAME: &str = "SELECT id FROM seatq.events WHERE name = $1";

/// The parameters of [`EVENT_BY_NAME`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventByName<'a> {
    pub(crate) name: &'a str,
}

impl<'a> EventByName<'a> {
    pub(crate) fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(EVENT_BY_NAME).bind(self.name)
    }
}

/// Give event $1 its imported seats ([`ImportSeats`]), numbered 1.. in file order: per seat
/// its row number (one per section and row), position, class, price,
/// section, row and seat labels, and whether it is for sale (else blocked).
pub(crate) const IMPORT_SEATS: &str = "
INSERT INTO seatq.seats (event_id, seat_no, row_no, pos, class, price_cents, section, row_label, label, state)
SELECT $1, s.ord, s.row_no, s.pos, s.class, s.price_cents, s.section, s.row_label, s.label,
       CASE WHEN s.for_sale THEN 'available' ELSE 'blocked' END::seatq.seat_state
FROM unnest($2::int[], $3::int[], $4::smallint[], $5::int[], $6::text[], $7::text[], $8::text[], $9::bool[])
    WITH ORDINALITY AS s(row_no, pos, class, price_cents, section, row_label, label, for_sale, ord)";

/// The parameters of [`IMPORT_SEATS`]: the event, then one array a column,
/// one element a seat, in file order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImportSeats<'a> {
    pub(crate) event: i64,
    /// Row numbers, one per section and row.
    pub(crate) row_nos: &'a [i32],
    /// Places in their rows.
    pub(crate) positions: &'a [i32],
    pub(crate) classes: &'a [i16],
    pub(crate) prices_cents: &'a [i32],
    pub(crate) sections: &'a [&'a str],
    pub(crate) row_labels: &'a [&'a str],
    pub(crate) labels: &'a [&'a str],
    /// Whether each is for sale (else blocked).
    pub(crate) for_sale: &'a [bool],
}

impl<'a> ImportSeats<'a> {
    pub(crate) fn query(&self) -> Effect<'a> {
        sqlx::query(IMPORT_SEATS)
            .bind(self.event)
            .bind(self.row_nos)
            .bind(self.positions)
            .bind(self.classes)
            .bind(self.prices_cents)
            .bind(self.sections)
            .bind(self.row_labels)
            .bind(self.labels)
            .bind(self.for_sale)
    }
}

/// Every event (or only event $1: [`ListEvents`]), one [`EventSummary`]
/// each, with its seat counts (taken: live holds
/// and bookings), counted by `seatq.availability`: a producer login may run
/// it (it may not read the seats themselves).
pub(crate) const LIST_EVENTS: &str = "
SELECT e.id, e.name, e.venue, e.starts_at, e.sales_from, e.sales_until, e.closed_at, e.per_customer,
       seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal,
       coalesce(sum(a.seats), 0)::bigint AS seats,
       coalesce(sum(a.free), 0)::bigint AS free,
       coalesce(sum(a.held + a.booked), 0)::bigint AS taken,
       coalesce(sum(a.seats - a.free - a.held - a.booked), 0)::bigint AS blocked
FROM seatq.events e
LEFT JOIN LATERAL seatq.availability(e.id) a ON true
WHERE $1::bigint IS NULL OR e.id = $1
GROUP BY e.id
ORDER BY e.id";

/// The parameters of [`LIST_EVENTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListEvents {
    /// Only this event (none: every event).
    pub(crate) event: Option<i64>,
}

impl ListEvents {
    pub(crate) fn query(&self) -> Rows<'static, EventSummary> {
        sqlx::query_as(LIST_EVENTS).bind(self.event)
    }
}

// The row of LIST_EVENTS.
/// An event as `seatq event list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventSummary {
    pub id: i64,
    pub name: String,
    pub venue: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub sales_from: Option<DateTime<Utc>>,
    pub sales_until: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
    pub per_customer: Option<i32>,
    /// Why sales refuse now (`not_on_sale`, `sales_closed`), or none: on sale.
    pub refusal: Option<String>,
    pub seats: i64,
    pub free: i64,
    pub taken: i64,
    /// Not for sale.
    pub blocked: i64,
}

/// Event $1's seats ([`SeatGroups`]) by section, class and how they show to a storefront
/// (free, held, booked, not for sale), with the price range, in the order
/// of the sections' first rows; from `seatq.seat_map`, so a producer login
/// may run it.
pub(crate) const SEAT_GROUPS: &str = "
SELECT section, class, state, count(*) AS seats,
       min(price_cents) AS min_price_cents, max(price_cents) AS max_price_cents
FROM seatq.seat_map($1)
GROUP BY section, class, state
ORDER BY min(row_no), class, state";

/// The parameters of [`SEAT_GROUPS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeatGroups {
    pub(crate) event: i64,
}

impl SeatGroups {
    pub(crate) fn query(&self) -> Rows<'static, SeatGroup> {
        sqlx::query_as(SEAT_GROUPS).bind(self.event)
    }
}

// The row of SEAT_GROUPS.
/// Seats of one section, class and state.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct SeatGroup {
    pub section: String,
    pub class: i16,
    /// How they show to a storefront: free (a lapsed hold too), held, booked
    /// or not for sale.
    pub state: SeatAvailability,
    pub seats: i64,
    pub min_price_cents: i32,
    pub max_price_cents: i32,
}

/// Stop event $1's sales now ([`CloseEvent`]; kept if already closed). Its
/// live holds are then cut ([`CutHolds`]).
pub(crate) const CLOSE_EVENT: &str = "UPDATE seatq.events SET closed_at = now() WHERE id = $1 AND closed_at IS NULL";

/// The parameters of [`CLOSE_EVENT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CloseEvent {
    pub(crate) event: i64,
}

impl CloseEvent {
    pub(crate) fn query(&self) -> Effect<'static> {
        sqlx::query(CLOSE_EVENT).bind(self.event)
    }
}

/// Event $1's line and waiting list as operators see them
/// ([`WaitingList`]; `seatq.line_summary`): a row when the event exists.
pub(crate) const WAITING_LIST: &str = "
SELECT e.waitlist_order AS order_, e.waitlist_closed_at AS closed_at, l.in_line, l.waiting, l.seats_wanted, l.oldest
FROM seatq.events e, seatq.line_summary(e.id) l WHERE e.id = $1";

/// The parameters of [`WAITING_LIST`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitingListOf {
    pub(crate) event: i64,
}

impl WaitingListOf {
    pub(crate) fn query(&self) -> Rows<'static, WaitingList> {
        sqlx::query_as(WAITING_LIST).bind(self.event)
    }
}

/// An event's line and waiting list ([`WAITING_LIST`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct WaitingList {
    /// The order its waiting list is served in.
    #[sqlx(rename = "order_")]
    pub order: WaitlistOrder,
    /// When the waiting list was closed (it takes no one since).
    pub closed_at: Option<DateTime<Utc>>,
    /// Requests queued in its line (asked to wait; not yet served).
    pub in_line: i64,
    /// Parties on its waiting list,
    pub waiting: i64,
    /// the seats they want in all,
    pub seats_wanted: i64,
    /// and when the longest-waiting joined.
    pub oldest: Option<DateTime<Utc>>,
}

/// Close event $1's waiting list ([`CloseWaitingList`]; kept if closed
/// already): it takes no one from now on, and its parties are failed
/// `sold_out` ([`SERVE_LINE`], next). A row when the event exists.
pub(crate) const CLOSE_WAITING_LIST: &str = "
UPDATE seatq.events SET waitlist_closed_at = coalesce(waitlist_closed_at, now()) WHERE id = $1 RETURNING id";

/// The parameters of [`CLOSE_WAITING_LIST`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CloseWaitingList {
    pub(crate) event: i64,
}

impl CloseWaitingList {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(CLOSE_WAITING_LIST).bind(self.event)
    }
}

/// Set the order event $1's waiting list is served in ($2: [`WaitlistOrderOf`]).
/// A row when the event exists.
pub(crate) const SET_WAITLIST_ORDER: &str = "UPDATE seatq.events SET waitlist_order = $2 WHERE id = $1 RETURNING id";

/// The parameters of [`SET_WAITLIST_ORDER`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitlistOrderOf {
    pub(crate) event: i64,
    pub(crate) order: WaitlistOrder,
}

impl WaitlistOrderOf {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(SET_WAITLIST_ORDER).bind(self.event).bind(self.order)
    }
}

/// Serve event $1's waiting list now ([`ServeLine`]; `seatq.serve_line`,
/// waiting for its line): after its list is closed, its parties are told.
pub(crate) const SERVE_LINE: &str = "SELECT seatq.serve_line($1, true)";

/// The parameters of [`SERVE_LINE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServeLine {
    pub(crate) event: i64,
}

impl ServeLine {
    pub(crate) fn query(&self) -> Scalars<'static, i32> {
        sqlx::query_scalar(SERVE_LINE).bind(self.event)
    }
}

/// Cut event $1's live holds to the end of its sales (`seatq.sales_end`),
/// seats and bookings alike ([`CutHolds`]): a hold never outlives its
/// event's sales, so on a closed event they lapse at once (confirm is then
/// `hold_expired`) and the sweeper releases them (`seatq.cut_holds`); moving
/// `sales_until` earlier shortens the holds already made, as it caps new
/// ones. A row when the event exists. (A statement of its own, after the
/// change to the event: on Citus a change to the events' table and a function
/// over the bookings' cannot be one statement.)
pub(crate) const CUT_HOLDS: &str = "
SELECT id FROM seatq.events, seatq.cut_holds(id, seatq.sales_end(sales_until, closed_at)) WHERE id = $1";

/// The parameters of [`CUT_HOLDS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CutHolds {
    pub(crate) event: i64,
}

impl CutHolds {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(CUT_HOLDS).bind(self.event)
    }
}

/// Count event $1's bookings toward the per-customer limit it was just
/// given ([`CountTowardLimit`]). On one server the trigger
/// `events_limit_added` has done so already; on Citus, where a trigger on
/// the events' table cannot reach the bookings' nodes, this does.
pub(crate) const COUNT_TOWARD_LIMIT: &str =
    "UPDATE seatq.bookings SET limited = true WHERE event_id = $1 AND NOT limited";

/// The parameters of [`COUNT_TOWARD_LIMIT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CountTowardLimit {
    pub(crate) event: i64,
}

impl CountTowardLimit {
    pub(crate) fn query(&self) -> Effect<'static> {
        sqlx::query(COUNT_TOWARD_LIMIT).bind(self.event)
    }
}

/// Event $1 as it stands ([`LockEvent`]; its fields as a [`NewEvent`]),
/// locked until the transaction ends (for an edit).
pub(crate) const LOCK_EVENT: &str = "
SELECT name, venue, starts_at, sales_from, sales_until, per_customer
FROM seatq.events WHERE id = $1 FOR UPDATE";

/// The parameters of [`LOCK_EVENT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct LockEvent {
    pub(crate) event: i64,
}

impl LockEvent {
    pub(crate) fn query(&self) -> Rows<'static, NewEvent> {
        sqlx::query_as(LOCK_EVENT).bind(self.event)
    }
}

/// Set event $1's name ($2), venue ($3), start ($4), sales window ($5,
/// $6) and per-customer limit ($7) ([`EditEvent`]); its live holds are then
/// cut to the end of its sales ([`CutHolds`]). A limit set or changed counts
/// from then on (`events_limit_added`, [`CountTowardLimit`]).
pub(crate) const EDIT_EVENT: &str = "
UPDATE seatq.events
SET name = $2, venue = $3, starts_at = $4, sales_from = $5, sales_until = $6, per_customer = $7
WHERE id = $1
RETURNING id";

/// The parameters of [`EDIT_EVENT`]: the event, and every field it is to
/// have (those unchanged as they were).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EditEvent<'a> {
    pub(crate) event: i64,
    pub(crate) name: &'a str,
    pub(crate) venue: Option<&'a str>,
    pub(crate) starts_at: Option<DateTime<Utc>>,
    pub(crate) sales_from: Option<DateTime<Utc>>,
    pub(crate) sales_until: Option<DateTime<Utc>>,
    pub(crate) per_customer: Option<i32>,
}

impl<'a> EditEvent<'a> {
    pub(crate) fn query(&self) -> Scalars<'a, i64> {
        sqlx::query_scalar(EDIT_EVENT)
            .bind(self.event)
            .bind(self.name)
            .bind(self.venue)
            .bind(self.starts_at)
            .bind(self.sales_from)
            .bind(self.sales_until)
            .bind(self.per_customer)
    }
}

/// Whether event $1 has been used ([`EventInUse`]): any booking of it (live, lapsed or
/// cancelled: history), or a request naming it still queued.
pub(crate) const EVENT_IN_USE: &str = "
SELECT EXISTS (SELECT 1 FROM seatq.bookings WHERE event_id = $1)
    OR EXISTS (SELECT 1 FROM seatq.requests WHERE event_id = $1 AND status = 'queued')";

/// The parameters of [`EVENT_IN_USE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventInUse {
    pub(crate) event: i64,
}

impl EventInUse {
    pub(crate) fn query(&self) -> Scalars<'static, bool> {
        sqlx::query_scalar(EVENT_IN_USE).bind(self.event)
    }
}

/// Delete event $1's seats, then the event ([`DeleteEvent`]); the event's
/// id, if it existed.
pub(crate) const DELETE_EVENT: &str = "
WITH seats AS (DELETE FROM seatq.seats WHERE event_id = $1)
DELETE FROM seatq.events WHERE id = $1 RETURNING id";

/// The parameters of [`DELETE_EVENT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeleteEvent {
    pub(crate) event: i64,
}

impl DeleteEvent {
    pub(crate) fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(DELETE_EVENT).bind(self.event)
    }
}
