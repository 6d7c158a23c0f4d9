//! Booking requests: the one definition shared by producers and workers.
//!
//! A request is stored as a `kind` plus a JSON `payload`, so producers in any
//! language can write one. [`Request::decode`] turns that pair back into a
//! typed request, or into a [`RequestError`] that names the field at fault.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::RequestError;
use crate::limits::DEFAULT_HOLD_SECONDS;
use crate::outcome::{BookingResult, ErrorCode};
use crate::token::HoldToken;
use crate::validate;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Hold seats for a while (a checkout window), to be confirmed or cancelled.
    Hold(SeatRequest),
    /// Book seats at once, with no checkout window.
    Book(SeatRequest),
    /// Turn a live hold into a booking.
    Confirm(BookingRef),
    /// Give a hold or booking back.
    Cancel(BookingRef),
    /// Lengthen a live hold (a checkout that needs more time).
    Extend(HoldExtension),
}

/// The payload of `hold` and `book`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SeatRequest {
    /// The event (flight, show) to take seats on.
    pub event: i64,
    /// Seat class (cabin or price band). Required unless `seats` names the seats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<i16>,
    /// Party size, 1 to [`crate::limits::MAX_PARTY`]. Defaults to the number of named seats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub party: Option<u32>,
    /// Who the seats are for; confirm and cancel must name the same customer.
    pub customer: String,
    /// How long a hold lasts, in seconds (`hold` only; default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u32>,
    /// Exact seat numbers wanted: all of them, or a `seats_taken` failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seats: Vec<i32>,
    /// Take what is left when fewer seats than the party remain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Seat the whole party next to each other in one row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub together: bool,
    /// Wait up to this many seconds (1 to [`crate::limits::MAX_WAIT_SECONDS`])
    /// rather than be refused for want of seats: the request joins its
    /// event's line, served in arrival order, and if its class is sold out,
    /// the waiting list, where seats that come free are handed to it
    /// (docs/requests.md "Waiting for seats"). Not with `seats` or `partial`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u32>,
    /// The hold token: on a hold or book, the token its booking will answer
    /// to; on confirm, cancel and extend, the token of the booking's hold
    /// ([`crate::token`]). The database keeps only its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub token: Option<HoldToken>,
}

/// The payload of `confirm` and `cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BookingRef {
    /// The booking id from the hold's or book's result.
    pub booking: i64,
    /// The booking's event (the hold's or book's). Optional on one
    /// PostgreSQL server; on Citus it routes the request to the node that
    /// keeps the booking, and is required. A booking of another event is
    /// not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<i64>,
    /// The customer who made the booking.
    pub customer: String,
    /// The hold token: on a hold or book, the token its booking will answer
    /// to; on confirm, cancel and extend, the token of the booking's hold
    /// ([`crate::token`]). The database keeps only its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub token: Option<HoldToken>,
}

/// The payload of `extend`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HoldExtension {
    /// The booking id from the hold's result.
    pub booking: i64,
    /// The booking's event, as [`BookingRef::event`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<i64>,
    /// The customer who made the hold.
    pub customer: String,
    /// Hold for this many seconds from now, 1 to [`crate::limits::MAX_HOLD_SECONDS`]
    /// (default [`DEFAULT_HOLD_SECONDS`]); never beyond `MAX_HOLD_SECONDS` from
    /// when the hold was made, and never shorter than it already is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u32>,
    /// The hold token: on a hold or book, the token its booking will answer
    /// to; on confirm, cancel and extend, the token of the booking's hold
    /// ([`crate::token`]). The database keeps only its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub token: Option<HoldToken>,
}

impl BookingRef {
    /// A reference to the booking a hold or book made: its id, event and
    /// customer (no token: set `token` for a booking made with one). The
    /// event it carries routes the request on Citus.
    pub fn to(booking: &BookingResult) -> BookingRef {
        BookingRef {
            booking: booking.booking,
            event: Some(booking.event),
            customer: booking.customer.clone(),
            token: None,
        }
    }
}

impl HoldExtension {
    /// The hold time asked for, in seconds from now.
    pub fn hold_secs(&self) -> u32 {
        self.hold_seconds.unwrap_or(DEFAULT_HOLD_SECONDS)
    }
}

impl Request {
    /// The `kind` column value.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Hold(_) => "hold",
            Request::Book(_) => "book",
            Request::Confirm(_) => "confirm",
            Request::Cancel(_) => "cancel",
            Request::Extend(_) => "extend",
        }
    }

    /// The `payload` column value.
    pub fn payload(&self) -> Value {
        let encoded = match self {
            Request::Hold(r) | Request::Book(r) => serde_json::to_value(r),
            Request::Confirm(r) | Request::Cancel(r) => serde_json::to_value(r),
            Request::Extend(r) => serde_json::to_value(r),
        };
        // Serializing plain structs of numbers and strings cannot fail.
        encoded.unwrap_or(Value::Null)
    }

    /// Validate and decode a stored request.
    pub fn decode(kind: &str, payload: &Value) -> Result<Request, RequestError> {
        validate::check(kind, payload)?;
        // A float that is an integer to `jsonb` (1e16) is one here too.
        let payload = &*validate::normalized(payload);
        fn parse<T: for<'de> Deserialize<'de>>(payload: &Value) -> Result<T, RequestError> {
            // Validation passed, so this only fails on a disagreement between
            // the checks and the types: report it rather than panic.
            T::deserialize(payload)
                .map_err(|e| RequestError { code: ErrorCode::InvalidRequest, message: e.to_string() })
        }
        Ok(match kind {
            "hold" => Request::Hold(parse(payload)?),
            "book" => Request::Book(parse(payload)?),
            "confirm" => Request::Confirm(parse(payload)?),
            "extend" => Request::Extend(parse(payload)?),
            _ => Request::Cancel(parse(payload)?),
        })
    }

    /// The customer it names.
    pub fn customer(&self) -> &str {
        match self {
            Request::Hold(r) | Request::Book(r) => &r.customer,
            Request::Confirm(r) | Request::Cancel(r) => &r.customer,
            Request::Extend(r) => &r.customer,
        }
    }

    /// The hold token it carries, if any.
    pub fn token(&self) -> Option<&HoldToken> {
        match self {
            Request::Hold(r) | Request::Book(r) => r.token.as_ref(),
            Request::Confirm(r) | Request::Cancel(r) => r.token.as_ref(),
            Request::Extend(r) => r.token.as_ref(),
        }
    }

    /// The request carrying `token` (in place of any it carried).
    pub fn with_token(mut self, token: HoldToken) -> Request {
        let slot = match &mut self {
            Request::Hold(r) | Request::Book(r) => &mut r.token,
            Request::Confirm(r) | Request::Cancel(r) => &mut r.token,
            Request::Extend(r) => &mut r.token,
        };
        *slot = Some(token);
        self
    }

    /// Validate a request built in code, by the same checks a stored one gets.
    pub fn validate(&self) -> Result<(), RequestError> {
        validate::check(self.kind(), &self.payload())
    }
}

impl SeatRequest {
    /// A request for `party` seats of `class`, cheapest first.
    pub fn new(event: i64, class: i16, party: u32, customer: impl Into<String>) -> Self {
        SeatRequest {
            event,
            class: Some(class),
            party: Some(party),
            customer: customer.into(),
            hold_seconds: None,
            seats: Vec::new(),
            partial: false,
            together: false,
            wait_seconds: None,
            token: None,
        }
    }

    /// A request for exactly these seat numbers.
    pub fn named(event: i64, seats: Vec<i32>, customer: impl Into<String>) -> Self {
        SeatRequest { class: None, party: None, seats, ..SeatRequest::new(event, 0, 0, customer) }
    }

    /// The number of seats wanted.
    pub fn party_size(&self) -> u32 {
        self.party.unwrap_or(self.seats.len() as u32)
    }

    /// The hold time in seconds.
    pub fn hold_secs(&self) -> u32 {
        self.hold_seconds.unwrap_or(DEFAULT_HOLD_SECONDS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_through_kind_and_payload() {
        let mut r = SeatRequest::new(7, 2, 3, "ann");
        r.together = true;
        let req = Request::Hold(r);
        assert_eq!(Request::decode(req.kind(), &req.payload()), Ok(req));
    }

    #[test]
    fn names_the_code_and_field_at_fault() {
        let cases = [
            ("reserve", json!({}), "unknown_kind", "reserve"),
            ("hold", json!([1]), "wrong_type", "payload"),
            ("hold", json!({"event": 1, "class": 1, "party": 3}), "missing_field", "customer"),
            ("book", json!({"event": "x", "class": 1, "party": 1, "customer": "c"}), "wrong_type", "event"),
            ("book", json!({"event": 1, "class": 1, "party": 1.5, "customer": "c"}), "wrong_type", "party"),
            ("book", json!({"event": 1, "class": 1, "party": 10, "customer": "c"}), "party_out_of_range", "party"),
            (
                "hold",
                json!({"event": 1, "class": 1, "party": 1, "customer": "c", "partal": true}),
                "unknown_field",
                "partal",
            ),
            (
                "book",
                json!({"event": 1, "class": 1, "party": 1, "customer": "c", "hold_seconds": 5}),
                "unknown_field",
                "hold_seconds",
            ),
            (
                "hold",
                json!({"event": 1, "class": 1, "party": 1, "customer": "c", "hold_seconds": 0}),
                "hold_time_out_of_range",
                "hold_seconds",
            ),
            ("book", json!({"event": 1, "seats": [3, 3], "customer": "c"}), "duplicate_seat", "3"),
            (
                "book",
                json!({"event": 1, "seats": (1..=10).collect::<Vec<_>>(), "customer": "c"}),
                "too_many_seats",
                "seats",
            ),
            ("book", json!({"event": 1, "class": 1, "customer": "c"}), "missing_field", "party"),
            ("book", json!({"event": 1, "party": 2, "customer": "c"}), "missing_field", "class"),
            ("book", json!({"event": 1, "class": 1, "party": 2, "customer": " "}), "invalid_request", "customer"),
            ("confirm", json!({"booking": 1}), "missing_field", "customer"),
            (
                "cancel",
                json!({"booking": 1, "customer": "c", "event": 0}),
                "invalid_request",
                "event: 0 is out of range",
            ),
            ("cancel", json!({"booking": 1, "customer": "c", "event": "1"}), "wrong_type", "event: must be an integer"),
            (
                "confirm",
                json!({"booking": 1, "customer": "c", "seat": 1}),
                "unknown_field",
                "booking, customer, event, token",
            ),
            ("cancel", json!({"booking": 1, "customer": "c", "hold_seconds": 60}), "unknown_field", "hold_seconds"),
            ("extend", json!({"customer": "c"}), "missing_field", "booking"),
            ("extend", json!({"booking": 1, "customer": "c", "hold_seconds": "60"}), "wrong_type", "hold_seconds"),
            (
                "extend",
                json!({"booking": 1, "customer": "c", "hold_seconds": 86401}),
                "hold_time_out_of_range",
                "hold_seconds",
            ),
            ("extend", json!({"booking": 1, "customer": "", "hold_seconds": 0}), "hold_time_out_of_range", "0"),
            ("extend", json!({"booking": 1, "customer": "", "hold_seconds": 60}), "invalid_request", "customer"),
            ("book", json!({"event": 1, "customer": "c", "note": "x".repeat(9000)}), "payload_too_large", "limit"),
        ];
        for (kind, payload, code, needle) in cases {
            let err = Request::decode(kind, &payload).expect_err(code);
            assert_eq!(err.code(), code, "{kind} {payload}: {err}");
            assert!(err.to_string().contains(needle), "{err} should name {needle}");
        }
    }

    #[test]
    fn extend_round_trips_and_defaults_its_hold_time() {
        let req = Request::Extend(HoldExtension {
            event: None,
            booking: 4,
            customer: "ann".into(),
            hold_seconds: Some(300),
            token: None,
        });
        assert_eq!(Request::decode(req.kind(), &req.payload()), Ok(req));
        let Ok(Request::Extend(r)) = Request::decode("extend", &json!({"booking": 4, "customer": "ann"})) else {
            panic!("not an extend")
        };
        assert_eq!(r.hold_secs(), DEFAULT_HOLD_SECONDS);
    }

    #[test]
    fn party_defaults_to_named_seats() {
        let req = Request::decode("book", &json!({"event": 1, "seats": [2, 3], "customer": "c"})).unwrap();
        let Request::Book(r) = req else { panic!("not a book") };
        assert_eq!(r.party_size(), 2);
    }
}
