//! Request validation: the checks, in the order they run, that decide the
//! error code of a malformed request.
//!
//! The database runs the same checks in the same order
//! (`seatq.request_error` in `migrations/0002_validation.sql`) on every row
//! inserted into `seatq.requests`, so a producer writing SQL by hand gets the
//! same code a Rust producer does; `tests/validation.rs` holds the two to the
//! same answers. Change both together.
//!
//! Order: a string containing U+0000 anywhere in the payload; kind; payload
//! size; payload is an object; unknown fields (the first in byte order);
//! missing required fields; field types (in field order; in `seats`, the
//! first element that is not an integer); then values: hold time, named
//! seats, party, class, customer, and combinations (for confirm, cancel and
//! extend: hold time, then customer).
//! State-dependent checks (unknown event, class or seat, the owner of a
//! booking) are the worker's. A request's queue options are checked around
//! these ([`check_new`]): its idempotency key first, its `run_at` last.
//!
//! Messages quote at most [`MAX_QUOTED_CHARS`] characters of an offending
//! input ([`quoted`]), with control and bidirectional formatting characters
//! escaped, so a huge or hostile kind, field name or number never comes back
//! whole or rearranges what a reader sees.
//!
//! Numbers are judged as `jsonb` stores them, since that is what the
//! database checks: an integer is a number `jsonb` prints without a fraction
//! or exponent that fits in an `i64`. `jsonb` keeps a fraction as written
//! (`2.0`), but stores a number written with an exponent by its value, so the
//! float 1e16, which serde_json writes as `1e+16`, is the integer
//! 10000000000000000 on both sides, and messages print numbers as `jsonb`
//! does. A payload given as a [`Value`] thus gets the same answer both ways.
//!
//! Two differences come from parsing JSON text, before any check runs:
//! - `jsonb` refuses a string containing U+0000 (the statement fails with
//!   SQLSTATE 22P05 and nothing is stored); here it is `invalid_request`,
//!   naming the field.
//! - serde_json reads any number written with a fraction or an exponent as a
//!   float, so JSON text with `"party": 2E0` (a bulk file line) is
//!   `wrong_type` here, whereas `jsonb` stores `2E0` as the integer 2 before
//!   any database check can see how it was written.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::{Map, Number, Value};

use crate::error::RequestError;
use crate::limits::{
    MAX_CUSTOMER_CHARS, MAX_HOLD_SECONDS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_PARTY, MAX_PAYLOAD_BYTES, MAX_QUOTED_CHARS,
    MAX_RUN_AT_DAYS, MAX_WAIT_SECONDS,
};
use crate::outcome::ErrorCode;

const HOLD_FIELDS: &[&str] = &["event", "class", "party", "customer", "hold_seconds", "seats", "partial", "together"];
const BOOK_FIELDS: &[&str] = &["event", "class", "party", "customer", "seats", "partial", "together"];
const BOOKING_FIELDS: &[&str] = &["booking", "customer"];
const EXTEND_FIELDS: &[&str] = &["booking", "customer", "hold_seconds"];
const INTEGER_FIELDS: &[&str] = &["event", "class", "party", "hold_seconds", "booking"];

/// The fields a kind accepts, or `None` for an unknown kind.
fn fields(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "hold" => Some(HOLD_FIELDS),
        "book" => Some(BOOK_FIELDS),
        "confirm" | "cancel" => Some(BOOKING_FIELDS),
        "extend" => Some(EXTEND_FIELDS),
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
        Value::Number(n) => jsonb_number_text(n).len(),
        scalar => scalar.to_string().len(),
    }
}

/// A number's text as `jsonb` prints it after reading serde_json's: as
/// written, except that a number with an exponent (`1e+16`, `1.5e-7`) is
/// printed by value (`10000000000000000`, `0.00000015`), and zero has no
/// sign. A number written `m.f e x` keeps `max(0, len(f) - x)` decimals.
fn jsonb_number_text(n: &Number) -> String {
    jsonb_text(&n.to_string())
}

/// The text `jsonb` prints for a JSON number written `written`.
fn jsonb_text(written: &str) -> String {
    let (negative, unsigned) = written.strip_prefix('-').map_or((false, written), |u| (true, u));
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        // An f64 has |exponent| <= 324; anything else is left as written.
        Some((m, e)) => match e.parse::<i64>() {
            Ok(e) if e.abs() <= 400 => (m, e),
            _ => return written.to_string(),
        },
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let digit = |i: i64| usize::try_from(i).ok().and_then(|i| digits.get(i)).map_or('0', |d| char::from(*d));
    let point = int.len() as i64 + exponent;
    let scale = (frac.len() as i64 - exponent).max(0);
    let whole: String = (0..point).map(digit).collect();
    let whole = whole.trim_start_matches('0');
    let fraction: String = (point..point + scale).map(digit).collect();
    let sign = if negative && digits.iter().any(|d| *d != b'0') { "-" } else { "" };
    let whole = if whole.is_empty() { "0" } else { whole };
    if scale > 0 { format!("{sign}{whole}.{fraction}") } else { format!("{sign}{whole}") }
}

/// The value of a JSON integer: a number `jsonb` prints without a fraction
/// or exponent, in the `i64` range (`seatq.is_json_int` in SQL).
fn int_value(v: &Value) -> Option<i64> {
    let Value::Number(n) = v else { return None };
    n.as_i64().or_else(|| {
        let text = jsonb_number_text(n);
        let digits = text.strip_prefix('-').unwrap_or(&text);
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok()).flatten()
    })
}

/// The payload with every integer field written as an integer, so a float
/// that `jsonb` stores as an integer (1e16) decodes into an integer field.
pub(crate) fn normalized(payload: &Value) -> Cow<'_, Value> {
    let needs = |v: &Value| v.is_f64() && int_value(v).is_some();
    let Value::Object(map) = payload else { return Cow::Borrowed(payload) };
    let fix = |v: &Value| if needs(v) { int_value(v).map_or_else(|| v.clone(), Value::from) } else { v.clone() };
    let touched = map.iter().any(|(k, v)| match (k.as_str(), v) {
        ("seats", Value::Array(a)) => a.iter().any(needs),
        (k, v) => INTEGER_FIELDS.contains(&k) && needs(v),
    });
    if !touched {
        return Cow::Borrowed(payload);
    }
    let map = map
        .iter()
        .map(|(k, v)| {
            let v = match (k.as_str(), v) {
                ("seats", Value::Array(a)) => Value::Array(a.iter().map(fix).collect()),
                (k, v) if INTEGER_FIELDS.contains(&k) => fix(v),
                (_, v) => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    Cow::Owned(Value::Object(map))
}

/// How a JSON value is named in messages (as `jsonb_typeof` names it; a
/// number by its text, cut to [`MAX_QUOTED_CHARS`]).
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(n) => bounded(&jsonb_number_text(n)),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// How an array element is named in messages: a number or a string by its
/// (bounded) value, anything else by what it is (`seatq.describe_element`).
fn describe_element(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => bounded(&jsonb_number_text(n)),
        Value::String(s) => quoted(s),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Control and bidirectional formatting characters, refused in customer
/// names and idempotency keys and escaped in messages: C0 (U+0000 to
/// U+001F), DEL and C1 (U+007F to U+009F), and the marks, embeddings,
/// overrides and isolates that reorder text (U+061C, U+200E, U+200F, U+202A
/// to U+202E, U+2066 to U+2069). `seatq.control_character` in SQL.
pub fn is_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// The first control or bidirectional formatting character of `s`, as
/// `U+XXXX`.
fn control_character(s: &str) -> Option<String> {
    s.chars().find(|c| is_control(*c)).map(|c| format!("U+{:04X}", u32::from(c)))
}

/// Why `text` cannot be a name people read (an event's, a venue's, a
/// section's, a seat's): a control or bidirectional formatting character
/// (U+0000 among them, which PostgreSQL cannot store), or more than `max`
/// characters; `None` if it can. The message names `field`.
pub fn label_error(field: &str, text: &str, max: usize) -> Option<String> {
    if let Some(c) = control_character(text) {
        return Some(format!("{field}: must not contain a control or bidirectional formatting character ({c})"));
    }
    let chars = text.chars().count();
    (chars > max).then(|| format!("{field}: {chars} characters; at most {max}"))
}

/// What follows a cut input: how long it was.
fn cut(s: &str) -> String {
    let n = s.chars().count();
    if n > MAX_QUOTED_CHARS { format!("… ({n} characters)") } else { String::new() }
}

/// `s` as a message shows it: its first [`MAX_QUOTED_CHARS`] characters
/// (then how long it was). For text that needs no escaping: numbers.
fn bounded(s: &str) -> String {
    s.chars().take(MAX_QUOTED_CHARS).collect::<String>() + &cut(s)
}

/// `s` quoted as a message shows it: in double quotes, its first
/// [`MAX_QUOTED_CHARS`] characters with `"` and `\` escaped by a backslash
/// and control and bidirectional formatting characters as `\uXXXX` (then
/// how long it was). `seatq.quoted` in SQL.
pub fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars().take(MAX_QUOTED_CHARS) {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if is_control(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out + &cut(s)
}

/// A field name as a message shows it: bare when it is a plain name (1 to
/// [`MAX_QUOTED_CHARS`] ASCII letters, digits and underscores), else
/// [`quoted`] (an empty name shows as `""`). `seatq.field_name` in SQL.
pub fn field_name(name: &str) -> Cow<'_, str> {
    let plain = !name.is_empty()
        && name.len() <= MAX_QUOTED_CHARS
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain { Cow::Borrowed(name) } else { Cow::Owned(quoted(name)) }
}

/// Check a stored request; `Ok` means it decodes into a valid [`crate::Request`].
///
/// A hold token (`token`, any kind may carry one) is checked after the rest
/// of the payload, as the database checks it (`seatq.request_error`, which
/// checks the payload without it first): the database takes the token out
/// of the payload it stores, keeping only its hash.
///
/// A confirm's, cancel's or extend's `event` (the booking's event, which
/// routes the request on Citus) is checked in the same step, as the
/// database does (migrations/0010_event_routing.sql).
pub fn check(kind: &str, payload: &Value) -> Result<(), RequestError> {
    let Value::Object(map) = payload else {
        return check_without_token(kind, payload);
    };
    let event = map.get(EVENT).filter(|_| names_booking(kind));
    let wait = map.get(WAIT_SECONDS).filter(|_| takes_seats(kind));
    let token = map.get(TOKEN);
    if event.is_none() && wait.is_none() && token.is_none() {
        return check_without_token(kind, payload);
    }
    // U+0000 anywhere refuses the whole payload first, as jsonb does.
    check_no_nul("payload", payload)?;
    let mut rest = map.clone();
    rest.remove(TOKEN);
    if event.is_some() {
        rest.remove(EVENT);
    }
    if wait.is_some() {
        rest.remove(WAIT_SECONDS);
    }
    check_without_token(kind, &Value::Object(rest))?;
    if let Some(event) = event {
        check_booking_event(event)?;
    }
    if let Some(wait) = wait {
        check_wait(wait, map)?;
    }
    token.map_or(Ok(()), check_token)
}

/// The field of a hold or book that asks to wait for seats.
pub const WAIT_SECONDS: &str = "wait_seconds";

/// Whether requests of this kind take seats (hold, book).
fn takes_seats(kind: &str) -> bool {
    matches!(kind, "hold" | "book")
}

/// A hold's or book's `wait_seconds`: an integer from 1 to
/// [`MAX_WAIT_SECONDS`], on a party that names no seats and is not partial
/// (migrations/0012_waiting_list.sql checks the same, in the same order).
fn check_wait(v: &Value, map: &Map<String, Value>) -> Result<(), RequestError> {
    let Some(secs) = int_value(v) else {
        return Err(fail(ErrorCode::WrongType, format!("{WAIT_SECONDS}: must be an integer, not {}", describe(v))));
    };
    if !(1..=i64::from(MAX_WAIT_SECONDS)).contains(&secs) {
        return Err(fail(
            ErrorCode::InvalidRequest,
            format!("{WAIT_SECONDS}: {secs} is out of range 1 to {MAX_WAIT_SECONDS}"),
        ));
    }
    if map.get("seats").and_then(Value::as_array).is_some_and(|seats| !seats.is_empty()) {
        return Err(fail(
            ErrorCode::InvalidRequest,
            format!("{WAIT_SECONDS}: a party that names its seats cannot wait for them"),
        ));
    }
    if map.get("partial") == Some(&Value::Bool(true)) {
        return Err(fail(ErrorCode::InvalidRequest, format!("{WAIT_SECONDS}: a partial party cannot wait")));
    }
    Ok(())
}

/// The field of a payload that carries a hold token.
pub const TOKEN: &str = "token";

/// The field that names a booking's event on a confirm, cancel or extend.
pub const EVENT: &str = "event";

/// Whether requests of this kind name a booking (confirm, cancel, extend)
/// rather than seats.
fn names_booking(kind: &str) -> bool {
    matches!(kind, "confirm" | "cancel" | "extend")
}

/// A booking's event: a positive integer (a JSON integer in the `i64`
/// range, as every integer field; `seatq.is_json_int` in SQL).
fn check_booking_event(v: &Value) -> Result<(), RequestError> {
    match int_value(v) {
        Some(id) if id >= 1 => Ok(()),
        Some(id) => Err(fail(ErrorCode::InvalidRequest, format!("{EVENT}: {id} is out of range 1 to {}", i64::MAX))),
        None => Err(fail(ErrorCode::WrongType, format!("{EVENT}: must be an integer, not {}", describe(v)))),
    }
}

/// A hold token's value: a string of a token's form.
fn check_token(v: &Value) -> Result<(), RequestError> {
    let Value::String(text) = v else {
        return Err(fail(ErrorCode::WrongType, format!("{TOKEN}: must be a string, not {}", describe(v))));
    };
    if !crate::token::is_token(text) {
        return Err(fail(ErrorCode::InvalidRequest, format!("{TOKEN}: must be {}", crate::token::TOKEN_FORM)));
    }
    Ok(())
}

fn check_without_token(kind: &str, payload: &Value) -> Result<(), RequestError> {
    check_no_nul("payload", payload)?;
    let Some(allowed) = fields(kind) else {
        return Err(fail(
            ErrorCode::UnknownKind,
            format!("unknown request kind {}: expected hold, book, confirm, cancel or extend", quoted(kind)),
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
            format!(
                "{}: unknown field for {kind}; expected one of {}{}, {TOKEN}{}",
                field_name(unknown),
                allowed.join(", "),
                if names_booking(kind) { ", event" } else { "" },
                if takes_seats(kind) { ", wait_seconds" } else { "" }
            ),
        ));
    }
    // The kinds that name a booking rather than seats.
    let for_booking = allowed == BOOKING_FIELDS || allowed == EXTEND_FIELDS;
    let required: &[&str] = if for_booking { BOOKING_FIELDS } else { &["event", "customer"] };
    if let Some(missing) = required.iter().find(|f| !map.contains_key(**f)) {
        return Err(fail(ErrorCode::MissingField, format!("{missing}: missing")));
    }
    for field in allowed {
        if let Some(v) = map.get(*field) {
            check_type(field, v)?;
        }
    }
    check_hold_seconds(map)?;
    if for_booking {
        return check_customer(map);
    }
    check_seat_values(map)
}

fn check_hold_seconds(map: &Map<String, Value>) -> Result<(), RequestError> {
    if let Some(secs) = int(map, "hold_seconds")
        && !(1..=i64::from(MAX_HOLD_SECONDS)).contains(&secs)
    {
        return Err(fail(
            ErrorCode::HoldTimeOutOfRange,
            format!("hold_seconds: {secs} is out of range 1 to {MAX_HOLD_SECONDS}"),
        ));
    }
    Ok(())
}

/// PostgreSQL cannot store U+0000 in `jsonb` (or `text`): refuse it, naming
/// where it is (`customer`, `seats[2]`, `payload` for the payload itself).
fn check_no_nul(path: &str, v: &Value) -> Result<(), RequestError> {
    let nul = |what: String| Err(fail(ErrorCode::InvalidRequest, format!("{what}: must not contain U+0000 (NUL)")));
    match v {
        Value::String(s) if s.contains('\0') => nul(path.to_string()),
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, item)| check_no_nul(&format!("{path}[{i}]"), item))
        }
        Value::Object(map) => map.iter().try_for_each(|(k, item)| {
            if k.contains('\0') {
                return nul(format!("field name {}", quoted(k)));
            }
            let k = field_name(k);
            check_no_nul(&if path == "payload" { k.into_owned() } else { format!("{path}.{k}") }, item)
        }),
        _ => Ok(()),
    }
}

/// Check an idempotency key: no U+0000 (PostgreSQL cannot store it in
/// `text`), no control or bidirectional formatting character, at most
/// [`MAX_IDEMPOTENCY_KEY_CHARS`] characters (`seatq.idempotency_key_error`
/// in SQL, where the enqueue is refused outright: SQLSTATE `SQ002`).
pub fn check_idempotency_key(key: &str) -> Result<(), RequestError> {
    if key.contains('\0') {
        return Err(fail(ErrorCode::InvalidRequest, "idempotency_key: must not contain U+0000 (NUL)"));
    }
    check_text("idempotency_key", key, MAX_IDEMPOTENCY_KEY_CHARS, ErrorCode::IdempotencyKeyTooLong)
}

/// Text a request names (a customer, a key): no control or bidirectional
/// formatting character, at most `max` characters (else `too_long`).
fn check_text(field: &str, text: &str, max: usize, too_long: ErrorCode) -> Result<(), RequestError> {
    if let Some(c) = control_character(text) {
        return Err(fail(
            ErrorCode::InvalidRequest,
            format!("{field}: must not contain a control or bidirectional formatting character ({c})"),
        ));
    }
    let chars = text.chars().count();
    if chars > max {
        return Err(fail(too_long, format!("{field}: {chars} characters; at most {max}")));
    }
    Ok(())
}

/// Check when a request is due: no more than [`MAX_RUN_AT_DAYS`] from now
/// (`seatq.run_at_error` in SQL, which also refuses `infinity`, a time
/// Rust cannot hold). `None` is now.
pub fn check_run_at(run_at: Option<DateTime<Utc>>) -> Result<(), RequestError> {
    match run_at {
        Some(at) if at > Utc::now() + chrono::Duration::days(MAX_RUN_AT_DAYS) => {
            Err(fail(ErrorCode::RunAtOutOfRange, format!("run_at: must be at most {MAX_RUN_AT_DAYS} days from now")))
        }
        _ => Ok(()),
    }
}

/// Check a request to enqueue with its queue options, in the database's
/// order: the idempotency key, the request, then `run_at`.
pub fn check_new(
    kind: &str,
    payload: &Value,
    idempotency_key: Option<&str>,
    run_at: Option<DateTime<Utc>>,
) -> Result<(), RequestError> {
    idempotency_key.map_or(Ok(()), check_idempotency_key)?;
    check(kind, payload)?;
    check_run_at(run_at)
}

fn check_type(field: &str, v: &Value) -> Result<(), RequestError> {
    let ok = match field {
        "customer" => v.is_string(),
        "partial" | "together" => v.is_boolean(),
        "seats" => match v.as_array().and_then(|a| a.iter().enumerate().find(|(_, s)| int_value(s).is_none())) {
            Some((i, element)) => {
                return Err(fail(
                    ErrorCode::WrongType,
                    format!("{field}[{i}]: {} is not an integer", describe_element(element)),
                ));
            }
            None => v.is_array(),
        },
        f if INTEGER_FIELDS.contains(&f) => int_value(v).is_some(),
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
    map.get(field).and_then(int_value)
}

fn check_seat_values(map: &Map<String, Value>) -> Result<(), RequestError> {
    let seats: Vec<i64> = map
        .get("seats")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(int_value).collect())
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
    check_text("customer", customer, MAX_CUSTOMER_CHARS, ErrorCode::InvalidRequest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers as PostgreSQL 15 prints `x::jsonb` (checked with psql).
    #[test]
    fn prints_numbers_as_jsonb_does() {
        let cases = [
            ("2", "2"),
            ("-7", "-7"),
            ("2.0", "2.0"),
            ("-0.0", "0.0"),
            ("0.0001", "0.0001"),
            ("2.50", "2.50"),
            ("1e+16", "10000000000000000"),
            ("1.5e+16", "15000000000000000"),
            ("9.2e+18", "9200000000000000000"),
            ("-1e-7", "-0.0000001"),
            ("1.50e1", "15.0"),
            ("123.456e-2", "1.23456"),
            ("1.0e+0", "1.0"),
            ("5e-1", "0.5"),
            ("-1.25e+2", "-125"),
            ("0.0e-2", "0.000"),
            ("-0.0e+0", "0.0"),
            ("0.000e3", "0"),
        ];
        for (written, jsonb) in cases {
            assert_eq!(jsonb_text(written), jsonb, "{written}");
        }
        // serde_json writes large and tiny floats with an exponent.
        assert_eq!(jsonb_number_text(&Number::from_f64(1e16).unwrap()), "10000000000000000");
        assert_eq!(jsonb_number_text(&Number::from_f64(2.0).unwrap()), "2.0");
        assert_eq!(int_value(&Value::from(1e16)), Some(10_000_000_000_000_000));
        assert_eq!(int_value(&Value::from(1e19)), None);
        assert_eq!(int_value(&Value::from(2.0)), None);
        assert_eq!(int_value(&Value::from(u64::MAX)), None);
    }
}
