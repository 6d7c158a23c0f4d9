//! What a finished request reports: the shared result and status types,
//! and the states of bookings and seats. Each status and state is the
//! PostgreSQL enum of the same name in the `seatq` schema, read and bound as
//! itself, and serialised as its label.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::postgres::{PgHasArrayType, PgTypeInfo};

/// An enum whose values are labels (snake case): serialised as the label,
/// with `as_str`, `Display` and `FromStr` on the same names and the list of
/// every value (`strum::VariantArray`).
macro_rules! labelled {
    ($(#[$meta:meta])* pub enum $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize,
            strum::IntoStaticStr, strum::Display, strum::EnumString, strum::VariantArray,
        )]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(rename_all = "snake_case")]
        #[strum(serialize_all = "snake_case")]
        pub enum $name { $($body)* }

        impl $name {
            /// The label, as stored and serialised.
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }

        /// Compared with a label as stored and serialised (`"sold_out"`).
        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

/// A [`labelled!`] enum that is also the PostgreSQL enum `seatq.$sql`, read
/// and bound as itself: bound by its qualified name, and read whether or not
/// the session's `search_path` holds the schema (PostgreSQL then names the
/// type without it, and sqlx's derived `Type` would refuse it).
macro_rules! seatq_enum {
    ($(#[$meta:meta])* pub enum $name:ident($sql:literal) { $($body:tt)* }) => {
        labelled! {
            $(#[$meta])*
            #[derive(sqlx::Encode, sqlx::Decode)]
            #[sqlx(rename_all = "snake_case")]
            pub enum $name { $($body)* }
        }

        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> PgTypeInfo {
                PgTypeInfo::with_name(concat!("seatq.", $sql))
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                *ty == Self::type_info() || *ty == PgTypeInfo::with_name($sql)
            }
        }

        impl PgHasArrayType for $name {
            fn array_type_info() -> PgTypeInfo {
                PgTypeInfo::array_of(concat!("seatq.", $sql))
            }
        }
    };
}

/// The `result` of a successful request: the booking as it now stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BookingResult {
    /// Booking id, to confirm or cancel with.
    pub booking: i64,
    pub event: i64,
    pub customer: String,
    /// Held, booked or cancelled.
    pub state: BookingState,
    /// The seats, in seat-number order.
    pub seats: Vec<SeatInfo>,
    /// Sum of the seats' prices.
    pub total_cents: i64,
    /// When an unconfirmed hold lapses; absent once booked or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_until: Option<DateTime<Utc>>,
    /// `extend` only: more time was asked for than a hold may last
    /// (`limits::MAX_HOLD_SECONDS` from when it was made), so `held_until` is
    /// that limit. Absent (false) otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
}

/// One seat of a booking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeatInfo {
    pub seat: i32,
    pub class: i16,
    pub row: i32,
    pub pos: i32,
    pub price_cents: i32,
    /// The venue's names for the seat: section ("Circle"), row ("C") and
    /// seat ("14"). Empty where the event's seats have none.
    #[serde(default)]
    pub section: String,
    #[serde(default)]
    pub row_label: String,
    #[serde(default)]
    pub label: String,
}

impl SeatInfo {
    /// The seat as the venue names it, "Circle, row C, seat 14"; "seat 56"
    /// where the event's seats have no names.
    pub fn place(&self) -> String {
        if self.label.is_empty() {
            format!("seat {}", self.seat)
        } else {
            format!("{}, row {}, seat {}", self.section, self.row_label, self.label)
        }
    }
}

/// Cents as money: 4500 -> "45.00", -50 -> "-0.50".
pub fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", cents.unsigned_abs() / 100, cents.unsigned_abs() % 100)
}

/// Prices from `low` to `high` cents as money: "45.00" when they are one,
/// "28.00 - 32.50" otherwise.
pub fn money_range(low: i64, high: i64) -> String {
    match low == high {
        true => money(low),
        false => format!("{} - {}", money(low), money(high)),
    }
}

/// Seats as the venue names them, a row at a time: "Circle, row C, seats
/// 13, 14; row D, seat 2"; by number ("seats 56, 57") where the event's
/// seats have no names; empty for no seats.
pub fn booked_places(seats: &[SeatInfo]) -> String {
    use std::fmt::Write as _;
    let word = |several: bool| if several { "seats" } else { "seat" };
    let mut text = String::new();
    if seats.iter().all(|s| s.label.is_empty()) {
        for (i, s) in seats.iter().enumerate() {
            let _ = match i {
                0 => write!(text, "{} {}", word(seats.len() > 1), s.seat),
                _ => write!(text, ", {}", s.seat),
            };
        }
        return text;
    }
    let mut last: Option<(&str, &str)> = None;
    for (i, s) in seats.iter().enumerate() {
        let here = (s.section.as_str(), s.row_label.as_str());
        // Writing to a String cannot fail.
        let _ = if last == Some(here) {
            write!(text, ", {}", s.label)
        } else {
            let several = seats.get(i + 1).is_some_and(|n| (n.section.as_str(), n.row_label.as_str()) == here);
            let separator = if last.is_some() { "; " } else { "" };
            match last.map(|(section, _)| section) == Some(here.0) {
                true => write!(text, "{separator}row {}, {} {}", s.row_label, word(several), s.label),
                false => write!(text, "{separator}{}, row {}, {} {}", s.section, s.row_label, word(several), s.label),
            }
        };
        last = Some(here);
    }
    text
}

labelled! {
    /// Stable error codes recorded in `seatq.requests.error_code` (and one,
    /// `idempotency_conflict`, of an enqueue refused outright). Codes are
    /// added as seatq grows: a match outside seatq needs an arm for the ones
    /// to come. (Request kinds, statuses and states stay exhaustive: a new
    /// one changes what every reader must handle, and the compiler should
    /// name each place.)
    #[non_exhaustive]
    pub enum ErrorCode {
        /// The kind is not hold, book, confirm, cancel or extend.
        UnknownKind,
        /// The payload is larger than `limits::MAX_PAYLOAD_BYTES`.
        PayloadTooLarge,
        /// The payload has a field the kind does not take (a typo, or `hold_seconds` on a book).
        UnknownField,
        /// A required field is absent.
        MissingField,
        /// A field (or the payload itself) has the wrong JSON type.
        WrongType,
        /// `party` is not 1 to 9.
        PartyOutOfRange,
        /// `hold_seconds` is not 1 to 86400.
        HoldTimeOutOfRange,
        /// More than 9 seats named.
        TooManySeats,
        /// A seat named twice.
        DuplicateSeat,
        /// Any other malformed value: empty customer, a control or bidirectional formatting character
        /// in a customer name or idempotency key, class out of range, options that do not combine.
        InvalidRequest,
        /// `run_at` is further ahead than `limits::MAX_RUN_AT_DAYS`, or not a finite time (`infinity`).
        RunAtOutOfRange,
        /// No such event.
        UnknownEvent,
        /// The event has no seats of the class asked for (rather than having sold them all: `sold_out`).
        UnknownClass,
        /// A named seat does not exist on the event (seat numbers are per event).
        UnknownSeat,
        /// Fewer seats of the class are free than the party needs (and `partial` was not set).
        SoldOut,
        /// A named seat is held or booked by someone else, or being taken right now.
        SeatsTaken,
        /// A named seat is not for sale (a house seat, a wheelchair space).
        SeatNotForSale,
        /// The event's sales have not opened yet (`sales_from` is later).
        NotOnSale,
        /// The event's sales are over: past `sales_until`, or closed.
        SalesClosed,
        /// The customer would hold more seats of the event than its per-customer limit.
        CustomerLimitExceeded,
        /// `together`: no row has enough adjacent free seats of the class.
        NoAdjacentSeats,
        /// No such booking, or none of this producer's: another producer's booking is not found.
        BookingNotFound,
        /// The booking belongs to another customer.
        NotYourHold,
        /// The hold lapsed before it was confirmed.
        HoldExpired,
        /// The booking was cancelled.
        BookingCancelled,
        /// `extend`: the booking is booked, not held; there is no hold to lengthen.
        NotHeld,
        /// Processing failed unexpectedly `max_attempts` times (status `dead`).
        Internal,
        /// The idempotency key was first used for a request of another kind or
        /// payload. The enqueue is refused and nothing is stored, so this code
        /// is never recorded on a request.
        IdempotencyConflict,
        /// Two lines of a batch carry the same `ref`: both are refused (never
        /// enqueued, so this code is never recorded on a request).
        DuplicateRef,
        /// The idempotency key is longer than `limits::MAX_IDEMPOTENCY_KEY_CHARS`. The enqueue is
        /// refused and nothing is stored, so this code is never recorded on a request.
        IdempotencyKeyTooLong,
        /// An event's time (`starts_at`, `sales_from`, `sales_until`, `closed_at`) is not finite
        /// (`infinity`): refused by the database's checks, the message naming the field. Never recorded on
        /// a request.
        TimeNotFinite,
        /// JSON text names a field twice (in a bulk file or a venue file). The client refuses it
        /// rather than keep one of the two silently, as `jsonb` does (the last); never recorded on a
        /// request.
        DuplicateField,
        /// Text that is not JSON, or not of the shape wanted (a bulk-file line, a venue file, an
        /// HTTP body); never recorded on a request.
        InvalidJson,
        /// An event's own fields do not hold together: an empty or over-long name or venue, one holding
        /// a control or bidirectional formatting character, sales that end before they open, a
        /// `per_customer` below 1. The message names the field; never recorded on a request.
        InvalidEvent,
        /// An event of that name exists already (names are unique); never recorded on a request.
        EventExists,
        /// The event has bookings (or requests), so it cannot be deleted: close its sales
        /// instead; never recorded on a request.
        EventInUse,
        /// A line of a file (CSV, tab-separated or JSON lines) that cannot be read as one record: the
        /// wrong number of fields, an unclosed quote, not UTF-8. Never recorded on a request.
        InvalidLine,
        /// A file's header lacks a column it must have, or names one twice. Never recorded on a
        /// request.
        MissingColumn,
        /// A file's header names a column the reader does not know. Never recorded on a request.
        UnknownColumn,
        /// A venue file's seat position (`pos`) is not a whole number from 1. Never recorded on a
        /// request.
        InvalidPosition,
        /// A venue file's seat class is not a whole number in range. Never recorded on a request.
        InvalidClass,
        /// A venue file's price is not an amount like 42 or 42.50, or is out of range. Never
        /// recorded on a request.
        InvalidPrice,
        /// A venue file's `for_sale` is not yes or no. Never recorded on a request.
        InvalidForSale,
        /// A venue file places two seats in the same row and position. Never recorded on a request.
        DuplicatePosition,
        /// A venue file's section, row or seat label is too long or holds a control or
        /// bidirectional formatting character. Never recorded on a request.
        InvalidLabel,
        /// A venue file has no seats. Never recorded on a request.
        NoSeats,
    }
}

seatq_enum! {
    /// Where a booking stands (`seatq.booking_state`).
    pub enum BookingState("booking_state") {
        /// Seats held until `held_until`, to be confirmed or cancelled (a hold
        /// past its time has lapsed: its seats are free to others).
        Held,
        Booked,
        Cancelled,
        /// A lapsed hold, marked so by the sweeper.
        Expired,
    }
}

impl BookingState {
    /// The state of the seats a live booking in this state owns; `None` for
    /// a booking that owns none any more (cancelled or expired).
    pub fn seats(self) -> Option<SeatState> {
        match self {
            BookingState::Held => Some(SeatState::Held),
            BookingState::Booked => Some(SeatState::Booked),
            BookingState::Cancelled | BookingState::Expired => None,
        }
    }
}

seatq_enum! {
    /// Where a seat stands (`seatq.seat_state`). A held seat whose hold has
    /// lapsed is free to others, though still marked held until swept.
    pub enum SeatState("seat_state") {
        Available,
        Held,
        Booked,
        /// Not for sale (house seats, wheelchair spaces): never allocated,
        /// counted neither free nor taken.
        Blocked,
    }
}

seatq_enum! {
    /// How a seat shows to a storefront (`seatq.seat_availability`, from
    /// `seatq.seat_map`): free (available, or its hold lapsed), held (a live
    /// hold), booked, or not for sale. Never says whose.
    pub enum SeatAvailability("seat_availability") {
        Free,
        Held,
        Booked,
        NotForSale,
    }
}

seatq_enum! {
    /// The order an event's waiting list is served in
    /// (`seatq.waitlist_order`, migrations/0012_waiting_list.sql).
    pub enum WaitlistOrder("waitlist_order") {
        /// In arrival order: a party that cannot be completed yet keeps the
        /// seats that come free for itself, and those behind it wait.
        Strict,
        /// The earliest party the free seats complete, whatever its place.
        FirstFit,
        /// The first that fits, until seats for as many as a party wants have
        /// gone to parties behind it; then it is served first (the default).
        Bounded,
    }
}

seatq_enum! {
    /// Where a request stands (`seatq.request_status`).
    pub enum Status("request_status") {
        /// Waiting for a worker (or for a retry).
        Queued,
        /// On its event's waiting list (it asked to wait, `wait_seconds`):
        /// not claimed by any worker until seats come free for it, which
        /// succeeds it, or its wait ends, which fails it `sold_out`.
        Waiting,
        Succeeded,
        /// Rejected with an error code; final.
        Failed,
        /// Failed unexpectedly too many times; `seatq retry` can requeue it.
        Dead,
    }
}

impl Status {
    /// Whether the request is finished.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Queued | Status::Waiting)
    }
}

/// A request row as a producer sees it.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RequestRecord {
    /// The request's id, as the enqueue returned it.
    pub id: i64,
    /// hold, book, confirm, cancel or extend (any other text is refused as
    /// `unknown_kind`).
    pub kind: String,
    /// The request as enqueued (`{}` for one refused as too large).
    pub payload: Value,
    /// The key that makes enqueueing it again safe, if it was given one.
    pub idempotency_key: Option<String>,
    /// Claimed before requests of a lower priority.
    pub priority: i16,
    /// Queued until a batch finishes it, then succeeded, failed or dead.
    pub status: Status,
    /// Processing attempts that failed unexpectedly.
    pub attempts: i32,
    /// Times it found the seats it needed held by other transactions.
    pub contention_retries: i32,
    /// Not claimed before this (a retry's backoff, or the producer's choice).
    pub run_at: DateTime<Utc>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When a batch first processed it.
    pub started_at: Option<DateTime<Utc>>,
    /// When its outcome was recorded.
    pub finished_at: Option<DateTime<Utc>>,
    /// Present when succeeded: a [`BookingResult`].
    pub result: Option<Value>,
    /// Why it failed (an [`ErrorCode`], or `internal` for a dead one).
    pub error_code: Option<String>,
    /// What the code means for this request, naming the field or seats.
    pub error_message: Option<String>,
    /// Where a request that asked to wait stands: its place in its event's
    /// line while queued, or on the waiting list while `waiting`
    /// (`seatq.place`). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[sqlx(skip)]
    pub place: Option<Place>,
    /// It asked to wait (`wait_seconds`): it is in its event's line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[sqlx(default)]
    pub line: bool,
    /// The batch the request was submitted in, if any (docs/group-bookings.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[sqlx(default)]
    pub batch: Option<String>,
    /// The submitter's own reference for the request in its batch (`ref`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[sqlx(default)]
    pub batch_ref: Option<String>,
    /// The line of the batch's file the request was first submitted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[sqlx(default)]
    pub batch_line: Option<i32>,
}

/// Which of an event's queues a waiting request is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PlaceList {
    /// The line: queued, served in arrival order.
    Line,
    /// The waiting list: the event is sold out for it; seats that come free
    /// are handed over in order.
    Waiting,
}

/// A request's place in its event's line or waiting list (`seatq.place`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Place {
    pub list: PlaceList,
    /// Parties before it (in the line: the event's; on the waiting list: of
    /// its class). It is number `parties_ahead + 1`.
    pub parties_ahead: i64,
    /// On the waiting list, the seats those parties want.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seats_ahead: Option<i64>,
}

impl RequestRecord {
    /// The typed result of a successful request.
    pub fn booking(&self) -> Option<BookingResult> {
        self.result.as_ref().and_then(|v| BookingResult::deserialize(v).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cents_read_as_money() {
        assert_eq!(
            (money(4500), money(5), money(-50), money(0)),
            ("45.00".into(), "0.05".into(), "-0.50".into(), "0.00".into())
        );
        assert_eq!((money_range(4500, 4500), money_range(2800, 3250)), ("45.00".into(), "28.00 - 32.50".into()));
    }

    #[test]
    fn seats_are_named_a_row_at_a_time() {
        let seat = |seat, section: &str, row: &str, label: &str| SeatInfo {
            seat,
            class: 1,
            row: 1,
            pos: 1,
            price_cents: 100,
            section: section.into(),
            row_label: row.into(),
            label: label.into(),
        };
        let seats = [
            seat(1, "Circle", "C", "13"),
            seat(2, "Circle", "C", "14"),
            seat(3, "Circle", "D", "2"),
            seat(4, "Box A", "1", "1"),
        ];
        assert_eq!(booked_places(&seats), "Circle, row C, seats 13, 14; row D, seat 2; Box A, row 1, seat 1");
        assert_eq!(booked_places(&[seat(56, "", "", ""), seat(57, "", "", "")]), "seats 56, 57");
        assert_eq!(booked_places(&[seat(56, "", "", "")]), "seat 56");
        assert_eq!(booked_places(&[]), "");
    }

    /// The reference lists every code a user can be given, so a new code
    /// cannot ship undocumented.
    #[test]
    fn every_code_is_documented() {
        use strum::VariantArray as _;
        let reference = include_str!("../../docs/requests.md");
        let missing: Vec<&str> =
            ErrorCode::VARIANTS.iter().map(|c| c.as_str()).filter(|c| !reference.contains(&format!("`{c}`"))).collect();
        assert!(missing.is_empty(), "codes not in docs/requests.md: {missing:?}");
    }

    #[test]
    fn serialised_codes_are_the_stored_ones() {
        use strum::VariantArray as _;
        for code in ErrorCode::VARIANTS {
            assert_eq!(serde_json::to_value(code).expect("JSON"), code.as_str(), "{code:?}");
            assert_eq!(code.as_str().parse::<ErrorCode>(), Ok(*code));
        }
        for status in Status::VARIANTS {
            assert_eq!(serde_json::to_value(status).expect("JSON"), status.as_str(), "{status:?}");
        }
        for state in BookingState::VARIANTS {
            assert_eq!(serde_json::to_value(state).expect("JSON"), state.as_str(), "{state:?}");
        }
        for state in SeatState::VARIANTS {
            assert_eq!(serde_json::to_value(state).expect("JSON"), state.as_str(), "{state:?}");
        }
        for order in WaitlistOrder::VARIANTS {
            assert_eq!(serde_json::to_value(order).expect("JSON"), order.as_str(), "{order:?}");
        }
        for state in SeatAvailability::VARIANTS {
            assert_eq!(serde_json::to_value(state).expect("JSON"), state.as_str(), "{state:?}");
        }
    }
}
