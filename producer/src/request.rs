//! Booking requests: the one definition shared by producers and workers.
//!
//! A request is stored as a `kind` plus a JSON `payload`, so producers in any
//! language can write one. [`Request::decode`] turns that pair back into a
//! typed request, or into a [`RequestError`] that names the field at fault.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest party one request may ask for.
pub const MAX_PARTY: u32 = 9;
/// Hold time when a request names none: ten minutes.
pub const DEFAULT_HOLD_SECONDS: u32 = 600;
/// Longest hold a request may ask for: one day.
pub const MAX_HOLD_SECONDS: u32 = 86_400;

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
}

/// The payload of `hold` and `book`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeatRequest {
    /// The event (flight, show) to take seats on.
    pub event: i64,
    /// Seat class (cabin or price band). Required unless `seats` names the seats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<i16>,
    /// Party size, 1 to [`MAX_PARTY`]. Defaults to the number of named seats.
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
    #[serde(default, skip_serializing_if = "is_false")]
    pub partial: bool,
    /// Seat the whole party next to each other in one row.
    #[serde(default, skip_serializing_if = "is_false")]
    pub together: bool,
}

/// The payload of `confirm` and `cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BookingRef {
    /// The booking id from the hold's or book's result.
    pub booking: i64,
    /// The customer who made the booking.
    pub customer: String,
}

/// Why a request could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The kind is not one of hold, book, confirm, cancel.
    #[error("unknown request kind {0:?}: expected hold, book, confirm or cancel")]
    UnknownKind(String),
    /// The payload does not decode (missing, unknown or wrongly typed field).
    #[error("invalid {kind} payload: {message}")]
    Payload { kind: &'static str, message: String },
    /// A field decodes but its value is not allowed.
    #[error("invalid {field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
}

impl RequestError {
    /// The stable error code recorded on a failed request.
    pub fn code(&self) -> &'static str {
        match self {
            RequestError::UnknownKind(_) => "unknown_kind",
            RequestError::Payload { .. } | RequestError::Field { .. } => "invalid_request",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn field(field: &'static str, message: impl Into<String>) -> RequestError {
    RequestError::Field {
        field,
        message: message.into(),
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
        }
    }

    /// The `payload` column value.
    pub fn payload(&self) -> Value {
        let encoded = match self {
            Request::Hold(r) | Request::Book(r) => serde_json::to_value(r),
            Request::Confirm(r) | Request::Cancel(r) => serde_json::to_value(r),
        };
        // Serializing plain structs of numbers and strings cannot fail.
        encoded.unwrap_or(Value::Null)
    }

    /// Decode and validate a stored request.
    pub fn decode(kind: &str, payload: &Value) -> Result<Request, RequestError> {
        fn parse<T: for<'de> Deserialize<'de>>(
            kind: &'static str,
            payload: &Value,
        ) -> Result<T, RequestError> {
            T::deserialize(payload).map_err(|e| RequestError::Payload {
                kind,
                message: e.to_string(),
            })
        }
        let request = match kind {
            "hold" => Request::Hold(parse("hold", payload)?),
            "book" => Request::Book(parse("book", payload)?),
            "confirm" => Request::Confirm(parse("confirm", payload)?),
            "cancel" => Request::Cancel(parse("cancel", payload)?),
            other => return Err(RequestError::UnknownKind(other.to_string())),
        };
        request.validate()?;
        Ok(request)
    }

    /// Check the values that decoding alone does not.
    pub fn validate(&self) -> Result<(), RequestError> {
        match self {
            Request::Hold(r) | Request::Book(r) => {
                if matches!(self, Request::Book(_)) && r.hold_seconds.is_some() {
                    return Err(field("hold_seconds", "only a hold has a hold time"));
                }
                r.validate()
            }
            Request::Confirm(r) | Request::Cancel(r) => {
                if r.customer.trim().is_empty() {
                    return Err(field("customer", "must not be empty"));
                }
                Ok(())
            }
        }
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
        }
    }

    /// A request for exactly these seat numbers.
    pub fn named(event: i64, seats: Vec<i32>, customer: impl Into<String>) -> Self {
        SeatRequest {
            class: None,
            party: None,
            seats,
            ..SeatRequest::new(event, 0, 0, customer)
        }
    }

    /// The number of seats wanted.
    pub fn party_size(&self) -> u32 {
        self.party.unwrap_or(self.seats.len() as u32)
    }

    /// The hold time in seconds.
    pub fn hold_secs(&self) -> u32 {
        self.hold_seconds.unwrap_or(DEFAULT_HOLD_SECONDS)
    }

    fn validate(&self) -> Result<(), RequestError> {
        if self.customer.trim().is_empty() {
            return Err(field("customer", "must not be empty"));
        }
        let party = self.party_size();
        if !(1..=MAX_PARTY).contains(&party) {
            return Err(field(
                "party",
                format!("{party} is out of range 1..={MAX_PARTY}"),
            ));
        }
        if let Some(secs) = self.hold_seconds
            && !(1..=MAX_HOLD_SECONDS).contains(&secs)
        {
            return Err(field(
                "hold_seconds",
                format!("{secs} is out of range 1..={MAX_HOLD_SECONDS}"),
            ));
        }
        if self.seats.is_empty() {
            if self.class.is_none() {
                return Err(field("class", "is required unless `seats` names the seats"));
            }
            return Ok(());
        }
        if self.seats.len() as u32 != party {
            return Err(field(
                "seats",
                format!("names {} seats but party is {party}", self.seats.len()),
            ));
        }
        let mut sorted = self.seats.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(field("seats", format!("seat {} is named twice", w[0])));
        }
        if let Some(bad) = sorted.iter().find(|s| **s <= 0) {
            return Err(field(
                "seats",
                format!("seat number {bad} must be positive"),
            ));
        }
        if self.partial {
            return Err(field("partial", "cannot be combined with named seats"));
        }
        if self.together {
            return Err(field("together", "cannot be combined with named seats"));
        }
        Ok(())
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
    fn names_the_field_at_fault() {
        let err =
            Request::decode("hold", &json!({"event": 1, "class": 1, "party": 3})).unwrap_err();
        assert_eq!(err.code(), "invalid_request");
        assert!(err.to_string().contains("customer"), "{err}");

        let err = Request::decode("book", &json!({"event": "x", "class": 1, "customer": "c"}))
            .unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");

        let err = Request::decode(
            "book",
            &json!({"event": 1, "class": 1, "party": 10, "customer": "c"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("party"), "{err}");

        let err = Request::decode(
            "hold",
            &json!({"event": 1, "class": 1, "party": 1, "customer": "c", "partal": true}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("partal"), "{err}");

        let err = Request::decode(
            "book",
            &json!({"event": 1, "seats": [3, 3], "customer": "c"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("named twice"), "{err}");

        assert_eq!(
            Request::decode("reserve", &json!({})).unwrap_err().code(),
            "unknown_kind"
        );
    }

    #[test]
    fn party_defaults_to_named_seats() {
        let req = Request::decode(
            "book",
            &json!({"event": 1, "seats": [2, 3], "customer": "c"}),
        )
        .unwrap();
        let Request::Book(r) = req else {
            panic!("not a book")
        };
        assert_eq!(r.party_size(), 2);
    }
}
