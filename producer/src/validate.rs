//! Request validation: the checks, in the order they run, that decide the
//! error code of a malformed request.
//!
//! The database runs the same checks in the same order
//! (`seatq.request_error` in `migrations/0002_validation.sql`) on every row
//! inserted into `seatq.requests`, so a producer writing SQL by hand gets the
//! same code a Rust producer does; `tests/validation.rs` holds the two to the
//! same answers. Change both together.
//!
//! Order: kind; payload size; payload is an object; unknown fields (the
//! first in byte order); missing required fields; field types (in field
//! order); then values: hold time, named seats, party, class, customer, and
//! combinations. State-dependent checks (unknown event or seat, the owner of a
//! booking) are the worker's.

use serde_json::{Map, Value};

use crate::outcome::ErrorCode;
use crate::request::{MAX_HOLD_SECONDS, MAX_PARTY, RequestError};

/// Largest payload accepted, in bytes of JSON text.
pub const MAX_PAYLOAD_BYTES: usize = 8192;
/// Longest customer name, in characters.
pub const MAX_CUSTOMER_CHARS: usize = 200;

const HOLD_FIELDS: &[&str] = &["event", "class", "party", "customer", "hold_seconds", "seats", "partial", "together"];
const BOOK_FIELDS: &[&str] = &["event", "class", "party", "customer", "seats", "partial", "together"];
const BOOKING_FIELDS: &[&str] = &["booking", "customer"];
const INTEGER_FIELDS: &[&str] = &["event", "class", "party", "hold_seconds", "booking"];

/// The fields a kind accepts, or `None` for an unknown kind.
fn fields(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "hold" => Some(HOLD_FIELDS),
        "book" => Some(BOOK_FIELDS),
        "confirm" | "cancel" => Some(BOOKING_FIELDS),
        _ => None,
    }
}

fn fail(code: ErrorCode, message: impl Into<String>) -> RequestError {
    RequestError { code, message: message.into() }
}

/// Length in bytes of the value as PostgreSQL prints a `jsonb` (`", "` and
/// `": "` between items), so the size limit means the same on both sides.
fn jsonb_text_len(v: &Value) -> usize {
    let items = |n: usize| 2 + 2 * n.saturating_sub(1);
    match v {
        Value::Array(a) => items(a.len()) + a.iter().map(jsonb_text_len).sum::<usize>(),
        Value::Object(o) => {
            items(o.len())
                + o.iter()
                    .map(|(k, v)| Value::from(k.as_str()).to_string().len() + 2 + jsonb_text_len(v))
                    .sum::<usize>()
        }
        scalar => scalar.to_string().len(),
    }
}

/// How a JSON value is named in messages (as `jsonb_typeof` names it; a
/// number by its text).
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// Check a stored request; `Ok` means it decodes into a valid [`crate::Request`].
pub fn check(kind: &str, payload: &Value) -> Result<(), RequestError> {
    let Some(allowed) = fields(kind) else {
        return Err(fail(
            ErrorCode::UnknownKind,
            format!("unknown request kind \"{kind}\": expected hold, book, confirm or cancel"),
        ));
    };
    let size = jsonb_text_len(payload);
    if size > MAX_PAYLOAD_BYTES {
        return Err(fail(
            ErrorCode::PayloadTooLarge,
            format!("payload is {size} bytes; the limit is {MAX_PAYLOAD_BYTES}"),
        ));
    }
    let Value::Object(map) = payload else {
        return Err(fail(ErrorCode::WrongType, format!("payload: must be a JSON object, not {}", describe(payload))));
    };
    // The first in byte order, like `min(key COLLATE "C")`.
    if let Some(unknown) = map.keys().filter(|k| !allowed.contains(&k.as_str())).min() {
        return Err(fail(
            ErrorCode::UnknownField,
            format!("{unknown}: unknown field for {kind}; expected one of {}", allowed.join(", ")),
        ));
    }
    let for_booking = allowed == BOOKING_FIELDS;
    let required: &[&str] = if for_booking { BOOKING_FIELDS } else { &["event", "customer"] };
    if let Some(missing) = required.iter().find(|f| !map.contains_key(**f)) {
        return Err(fail(ErrorCode::MissingField, format!("{missing}: missing")));
    }
    for field in allowed {
        if let Some(v) = map.get(*field) {
            check_type(field, v)?;
        }
    }
    if for_booking {
        return check_customer(map);
    }
    check_seat_values(map)
}

fn check_type(field: &str, v: &Value) -> Result<(), RequestError> {
    let ok = match field {
        "customer" => v.is_string(),
        "partial" | "together" => v.is_boolean(),
        "seats" => v.as_array().is_some_and(|a| a.iter().all(|s| s.as_i64().is_some())),
        f if INTEGER_FIELDS.contains(&f) => v.as_i64().is_some(),
        _ => true,
    };
    if ok {
        return Ok(());
    }
    let want = match field {
        "customer" => "a string",
        "partial" | "together" => "true or false",
        "seats" => "an array of integers",
        _ => "an integer",
    };
    Err(fail(ErrorCode::WrongType, format!("{field}: must be {want}, not {}", describe(v))))
}

fn int(map: &Map<String, Value>, field: &str) -> Option<i64> {
    map.get(field).and_then(Value::as_i64)
}

fn check_seat_values(map: &Map<String, Value>) -> Result<(), RequestError> {
    if let Some(secs) = int(map, "hold_seconds")
        && !(1..=i64::from(MAX_HOLD_SECONDS)).contains(&secs)
    {
        return Err(fail(
            ErrorCode::HoldTimeOutOfRange,
            format!("hold_seconds: {secs} is out of range 1 to {MAX_HOLD_SECONDS}"),
        ));
    }
    let seats: Vec<i64> = map
        .get("seats")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    if seats.len() > MAX_PARTY as usize {
        return Err(fail(
            ErrorCode::TooManySeats,
            format!("seats: names {} seats; at most {MAX_PARTY} may be named", seats.len()),
        ));
    }
    for (i, s) in seats.iter().enumerate() {
        if seats[..i].contains(s) {
            return Err(fail(ErrorCode::DuplicateSeat, format!("seats: seat {s} is named twice")));
        }
    }
    if let Some(bad) = seats.iter().find(|s| !(1..=i64::from(i32::MAX)).contains(*s)) {
        return Err(fail(ErrorCode::UnknownSeat, format!("seats: there is no seat {bad}")));
    }
    let party = int(map, "party");
    if let Some(p) = party
        && !(1..=i64::from(MAX_PARTY)).contains(&p)
    {
        return Err(fail(ErrorCode::PartyOutOfRange, format!("party: {p} is out of range 1 to {MAX_PARTY}")));
    }
    if seats.is_empty() {
        if party.is_none() {
            return Err(fail(ErrorCode::MissingField, "party: missing (or name the seats)"));
        }
        if !map.contains_key("class") {
            return Err(fail(ErrorCode::MissingField, "class: missing (or name the seats)"));
        }
    }
    if let Some(c) = int(map, "class")
        && !(1..=i64::from(i16::MAX)).contains(&c)
    {
        return Err(fail(ErrorCode::InvalidRequest, format!("class: {c} is out of range 1 to {}", i16::MAX)));
    }
    check_customer(map)?;
    if !seats.is_empty() {
        if let Some(p) = party
            && p != seats.len() as i64
        {
            return Err(fail(
                ErrorCode::InvalidRequest,
                format!("party: {p} does not match the {} seats named", seats.len()),
            ));
        }
        for option in ["partial", "together"] {
            if map.get(option) == Some(&Value::Bool(true)) {
                return Err(fail(ErrorCode::InvalidRequest, format!("{option}: cannot be combined with named seats")));
            }
        }
    }
    Ok(())
}

fn check_customer(map: &Map<String, Value>) -> Result<(), RequestError> {
    let customer = map.get("customer").and_then(Value::as_str).unwrap_or_default();
    // The whitespace SQL's btrim(customer, E' \t\n\r') strips.
    if customer.trim_matches([' ', '\t', '\n', '\r']).is_empty() {
        return Err(fail(ErrorCode::InvalidRequest, "customer: must not be empty"));
    }
    let chars = customer.chars().count();
    if chars > MAX_CUSTOMER_CHARS {
        return Err(fail(
            ErrorCode::InvalidRequest,
            format!("customer: {chars} characters; at most {MAX_CUSTOMER_CHARS}"),
        ));
    }
    Ok(())
}
