//! What a finished request reports: the shared result and status types,
//! and the states of bookings and seats. Each status and state is the
//! PostgreSQL enum of the same name in the `seatq` schema, read and bound as
//! itself, and serialised as its label.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::postgres::{PgHasArrayType, PgTypeInfo};

/// `sqlx::Type` for an enum of the `seatq` schema (its labels read and
/// written by the derived `Encode` and `Decode`): bound by its qualified
/// name, and read whether or not the session's `search_path` holds the
/// schema (PostgreSQL then names the type without it, and the derived
/// `Type` would refuse it).
macro_rules! seatq_enum {
    ($rust:ty, $sql:literal) => {
        impl sqlx::Type<sqlx::Postgres> for $rust {
            fn type_info() -> PgTypeInfo {
                PgTypeInfo::with_name(concat!("seatq.", $sql))
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                *ty == Self::type_info() || *ty == PgTypeInfo::with_name($sql)
            }
        }

        impl PgHasArrayType for $rust {
            fn array_type_info() -> PgTypeInfo {
                PgTypeInfo::array_of(concat!("seatq.", $sql))
            }
        }
    };
}

/// The `result` of a successful request: the booking as it now stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// One seat of a booking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SeatInfo {
    pub seat: i32,
    pub class: i16,
    pub row: i32,
    pub pos: i32,
    pub price_cents: i32,
}

/// Stable error codes recorded in `seatq.requests.error_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The kind is not hold, book, confirm or cancel.
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
    /// Any other malformed value: empty customer, class out of range, options that do not combine.
    InvalidRequest,
    /// No such event.
    UnknownEvent,
    /// A named seat does not exist on the event (seat numbers are per event).
    UnknownSeat,
    /// Fewer seats of the class are free than the party needs (and `partial` was not set).
    SoldOut,
    /// A named seat is held or booked by someone else, or being taken right now.
    SeatsTaken,
    /// `together`: no row has enough adjacent free seats of the class.
    NoAdjacentSeats,
    /// No such booking.
    BookingNotFound,
    /// The booking belongs to another customer.
    NotYourHold,
    /// The hold lapsed before it was confirmed.
    HoldExpired,
    /// The booking was cancelled.
    BookingCancelled,
    /// Processing failed unexpectedly `max_attempts` times (status `dead`).
    Internal,
}

impl ErrorCode {
    /// The code as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownKind => "unknown_kind",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnknownField => "unknown_field",
            ErrorCode::MissingField => "missing_field",
            ErrorCode::WrongType => "wrong_type",
            ErrorCode::PartyOutOfRange => "party_out_of_range",
            ErrorCode::HoldTimeOutOfRange => "hold_time_out_of_range",
            ErrorCode::TooManySeats => "too_many_seats",
            ErrorCode::DuplicateSeat => "duplicate_seat",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnknownEvent => "unknown_event",
            ErrorCode::UnknownSeat => "unknown_seat",
            ErrorCode::SoldOut => "sold_out",
            ErrorCode::SeatsTaken => "seats_taken",
            ErrorCode::NoAdjacentSeats => "no_adjacent_seats",
            ErrorCode::BookingNotFound => "booking_not_found",
            ErrorCode::NotYourHold => "not_your_hold",
            ErrorCode::HoldExpired => "hold_expired",
            ErrorCode::BookingCancelled => "booking_cancelled",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a booking stands (`seatq.booking_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Encode, sqlx::Decode)]
#[serde(rename_all = "snake_case")]
#[sqlx(rename_all = "snake_case")]
pub enum BookingState {
    /// Seats held until `held_until`, to be confirmed or cancelled (a hold
    /// past its time has lapsed: its seats are free to others).
    Held,
    Booked,
    Cancelled,
    /// A lapsed hold, marked so by the sweeper.
    Expired,
}

impl BookingState {
    /// The state as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            BookingState::Held => "held",
            BookingState::Booked => "booked",
            BookingState::Cancelled => "cancelled",
            BookingState::Expired => "expired",
        }
    }

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

seatq_enum!(BookingState, "booking_state");

impl std::fmt::Display for BookingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a seat stands (`seatq.seat_state`). A held seat whose hold has
/// lapsed is free to others, though still marked held until swept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Encode, sqlx::Decode)]
#[serde(rename_all = "snake_case")]
#[sqlx(rename_all = "snake_case")]
pub enum SeatState {
    Available,
    Held,
    Booked,
}

impl SeatState {
    /// The state as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            SeatState::Available => "available",
            SeatState::Held => "held",
            SeatState::Booked => "booked",
        }
    }
}

seatq_enum!(SeatState, "seat_state");

impl std::fmt::Display for SeatState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request stands (`seatq.request_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Encode, sqlx::Decode)]
#[serde(rename_all = "snake_case")]
#[sqlx(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for a worker (or for a retry).
    Queued,
    Succeeded,
    /// Rejected with an error code; final.
    Failed,
    /// Failed unexpectedly too many times; `seatq retry` can requeue it.
    Dead,
}

seatq_enum!(Status, "request_status");

impl Status {
    /// Whether the request is finished.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Queued)
    }

    /// The status as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "queued" => Status::Queued,
            "succeeded" => Status::Succeeded,
            "failed" => Status::Failed,
            "dead" => Status::Dead,
            _ => return None,
        })
    }
}

/// A request row as a producer sees it.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct RequestRecord {
    pub id: i64,
    pub kind: String,
    pub payload: Value,
    pub idempotency_key: Option<String>,
    pub priority: i16,
    pub status: Status,
    pub attempts: i32,
    pub contention_retries: i32,
    pub run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Present when succeeded: a [`BookingResult`].
    pub result: Option<Value>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
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
    fn serialised_codes_are_the_stored_ones() {
        use ErrorCode::*;
        let all = [
            UnknownKind,
            PayloadTooLarge,
            UnknownField,
            MissingField,
            WrongType,
            PartyOutOfRange,
            HoldTimeOutOfRange,
            TooManySeats,
            DuplicateSeat,
            InvalidRequest,
            UnknownEvent,
            UnknownSeat,
            SoldOut,
            SeatsTaken,
            NoAdjacentSeats,
            BookingNotFound,
            NotYourHold,
            HoldExpired,
            BookingCancelled,
            Internal,
        ];
        for code in all {
            assert_eq!(serde_json::to_value(code).expect("JSON"), code.as_str(), "{code:?}");
        }
        for status in [Status::Queued, Status::Succeeded, Status::Failed, Status::Dead] {
            assert_eq!(serde_json::to_value(status).expect("JSON"), status.as_str(), "{status:?}");
        }
        for state in [BookingState::Held, BookingState::Booked, BookingState::Cancelled, BookingState::Expired] {
            assert_eq!(serde_json::to_value(state).expect("JSON"), state.as_str(), "{state:?}");
        }
        for state in [SeatState::Available, SeatState::Held, SeatState::Booked] {
            assert_eq!(serde_json::to_value(state).expect("JSON"), state.as_str(), "{state:?}");
        }
    }
}
