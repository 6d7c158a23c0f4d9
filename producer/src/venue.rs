//! Venue files: an event's seat map, to import with
//! [`crate::Client::import_event`].
//!
//! CSV: a header line naming the columns (any order)
//! `section,row,seat,pos,class,price,for_sale`, then one seat a line. JSON: an
//! object with the event's fields (`name`, `venue`, `starts_at`,
//! `sales_from`, `sales_until`, `per_customer`) and a `seats` array of
//! objects with the same seat fields. `pos` is the seat's place in its row
//! (adjacency), `price` in currency units with at most two decimals,
//! `for_sale` yes/no (true/false, 1/0). Every line is checked before anything
//! is imported, so a bad one is reported with its number (in JSON, the
//! seat's 1-based place in `seats`) and nothing is half imported.
//!
//! The CSV is read as RFC 4180 has it (by the `csv` crate): a field with a
//! comma or a quote in it is quoted (`"Box A, left"`, a quote inside
//! doubled); spaces around a field are trimmed, blank lines and lines
//! starting with `#` skipped. No field may hold a line break (labels are
//! plain text), so a quote left open is reported on the line it opens, with
//! every line it swallowed. A bad line is reported by the line it starts on.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::limits::{MAX_EVENT_NAME_CHARS, MAX_LABEL_CHARS, MAX_SECTION_CHARS};
use crate::lines::{self, BadLine, Dialect};
use crate::outcome::ErrorCode;
use crate::{RequestError, validate};

/// The columns of a CSV venue file, in the order seatq writes them.
pub const COLUMNS: [&str; 7] = ["section", "row", "seat", "pos", "class", "price", "for_sale"];

/// An event to create, and when it sells.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, sqlx::FromRow)]
#[serde(deny_unknown_fields)]
pub struct NewEvent {
    pub name: String,
    #[serde(default)]
    pub venue: Option<String>,
    #[serde(default)]
    pub starts_at: Option<DateTime<Utc>>,
    /// On sale from (absent: at once).
    #[serde(default)]
    pub sales_from: Option<DateTime<Utc>>,
    /// On sale until (absent: until `starts_at`, or without end if that is absent too).
    #[serde(default)]
    pub sales_until: Option<DateTime<Utc>>,
    /// At most this many live seats per customer (absent: no limit).
    #[serde(default)]
    pub per_customer: Option<i32>,
}

impl NewEvent {
    /// Check the event's own fields before anything is written: a name (not
    /// only spaces) and a venue of at most [`MAX_EVENT_NAME_CHARS`]
    /// characters with no control or bidirectional formatting character,
    /// sales that close after they open (`sales_until`, or the start when
    /// that is unset, after `sales_from`), a `per_customer` of 1 or more.
    /// Refused as [`ErrorCode::InvalidEvent`], the message naming the field.
    pub fn check(&self) -> Result<(), RequestError> {
        let invalid = |message: String| RequestError { code: ErrorCode::InvalidEvent, message };
        if self.name.trim().is_empty() {
            return Err(invalid("name: empty (every event needs a name)".into()));
        }
        if let Some(reason) = validate::label_error("name", &self.name, MAX_EVENT_NAME_CHARS) {
            return Err(invalid(reason));
        }
        if let Some(reason) =
            self.venue.as_deref().and_then(|venue| validate::label_error("venue", venue, MAX_EVENT_NAME_CHARS))
        {
            return Err(invalid(reason));
        }
        let (until, until_field) = match (self.sales_until, self.starts_at) {
            (Some(until), _) => (Some(until), "sales_until"),
            (None, start) => (start, "starts_at"),
        };
        if let (Some(from), Some(until)) = (self.sales_from, until)
            && until <= from
        {
            return Err(invalid(format!(
                "{until_field}: sales would close ({}) before they open (sales_from {})",
                until.to_rfc3339(),
                from.to_rfc3339()
            )));
        }
        if let Some(n) = self.per_customer
            && n < 1
        {
            return Err(invalid(format!("per_customer: {n}; at least 1 (leave it out for no limit)")));
        }
        Ok(())
    }
}

/// One seat of a venue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VenueSeat {
    pub section: String,
    pub row_label: String,
    pub label: String,
    /// Place in the row, for adjacency.
    pub pos: i32,
    pub class: i16,
    pub price_cents: i32,
    /// House seats, wheelchair spaces: false.
    pub for_sale: bool,
}

/// A parsed venue file.
#[derive(Debug, Default)]
pub struct Venue {
    /// The event's fields, from a JSON file (a CSV file has none).
    pub event: Option<NewEvent>,
    /// The seats, in file order.
    pub seats: Vec<VenueSeat>,
    pub bad: Vec<BadLine>,
}

/// A seat as the JSON form spells it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSeat {
    section: String,
    row: serde_json::Value,
    seat: serde_json::Value,
    pos: serde_json::Value,
    class: serde_json::Value,
    price: serde_json::Value,
    #[serde(default = "yes")]
    for_sale: serde_json::Value,
}

fn yes() -> serde_json::Value {
    serde_json::Value::Bool(true)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonVenue {
    #[serde(flatten)]
    event: NewEvent,
    seats: Vec<serde_json::Value>,
}

/// Parse a CSV venue file. Only an I/O error fails the whole parse.
pub fn parse_csv(reader: impl Read) -> std::io::Result<Venue> {
    let mut venue = Venue::default();
    let records = lines::records(reader, Dialect { lenient: true })?;
    let no_header = format!("no header line ({})", COLUMNS.join(","));
    let (order, lines) = match lines::after_header(records, header, &no_header) {
        Ok(read) => read,
        Err(bad) => {
            venue.bad = bad;
            return Ok(venue);
        }
    };
    let mut checker = Checker::default();
    for line in lines {
        let (n, fields) = match line {
            Ok(line) => line,
            Err(bad) => {
                venue.bad.push(bad);
                continue;
            }
        };
        let bad = |code: ErrorCode, reason: String| BadLine { line: n, code, reason };
        if fields.len() != COLUMNS.len() {
            venue.bad.push(bad(
                ErrorCode::InvalidLine,
                format!("{} fields, expected {} ({})", fields.len(), COLUMNS.len(), COLUMNS.join(",")),
            ));
            continue;
        }
        let get = |i: usize| fields[order[i]].as_str();
        match checker.seat(get(0), get(1), get(2), get(3), get(4), get(5), get(6)) {
            Ok(seat) => venue.seats.push(seat),
            Err((code, reason)) => venue.bad.push(bad(code, reason)),
        }
    }
    no_seats(&mut venue, "a header and no seat lines");
    Ok(venue)
}

/// A venue with no seat and no bad line is refused too (`no_seats`, on line
/// 1): an event nobody can book is a mistake, and would stay listed.
fn no_seats(venue: &mut Venue, what: &str) {
    if venue.seats.is_empty() && venue.bad.is_empty() {
        venue.bad.push(BadLine {
            line: 1,
            code: ErrorCode::NoSeats,
            reason: format!("the venue has no seats ({what})"),
        });
    }
}

/// Where each of [`COLUMNS`] is in the header.
fn header(fields: &[String]) -> Result<Vec<usize>, String> {
    let mut order = Vec::with_capacity(COLUMNS.len());
    for column in COLUMNS {
        match fields.iter().position(|f| f.eq_ignore_ascii_case(column)) {
            Some(i) => order.push(i),
            None => return Err(format!("header: no column {column:?} (expected {})", COLUMNS.join(","))),
        }
    }
    if let Some(extra) = fields.iter().find(|f| !COLUMNS.iter().any(|c| c.eq_ignore_ascii_case(f))) {
        return Err(format!("header: unknown column {extra:?} (expected {})", COLUMNS.join(",")));
    }
    Ok(order)
}

/// Parse a JSON venue file: the event's fields and its seats.
pub fn parse_json(mut reader: impl Read) -> std::io::Result<Venue> {
    let mut text = String::new();
    let mut venue = Venue::default();
    if let Err(e) = reader.read_to_string(&mut text) {
        if e.kind() == std::io::ErrorKind::InvalidData {
            venue.bad.push(BadLine { line: 1, code: ErrorCode::InvalidJson, reason: "not valid UTF-8".into() });
            return Ok(venue);
        }
        return Err(e);
    }
    let parsed: JsonVenue = match crate::json::from_str(text.trim_start_matches('\u{feff}')) {
        Ok(v) => v,
        Err(e) => {
            venue.bad.push(BadLine { line: e.line(), code: e.code(), reason: e.reason() });
            return Ok(venue);
        }
    };
    let mut checker = Checker::default();
    for (i, value) in parsed.seats.into_iter().enumerate() {
        let bad = |code: ErrorCode, reason: String| BadLine { line: i + 1, code, reason };
        let seat: JsonSeat = match serde_json::from_value(value) {
            Ok(s) => s,
            Err(e) => {
                venue.bad.push(bad(ErrorCode::InvalidLine, format!("seats[{i}]: {}", crate::json::bounded_reason(&e))));
                continue;
            }
        };
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        };
        let (row, label, pos, class, price, for_sale) = (
            text(&seat.row),
            text(&seat.seat),
            text(&seat.pos),
            text(&seat.class),
            text(&seat.price),
            text(&seat.for_sale),
        );
        match checker.seat(seat.section.trim(), &row, &label, &pos, &class, &price, &for_sale) {
            Ok(seat) => venue.seats.push(seat),
            Err((code, reason)) => venue.bad.push(bad(code, reason)),
        }
    }
    venue.event = Some(parsed.event);
    no_seats(&mut venue, "\"seats\" is empty");
    Ok(venue)
}

/// Checks each seat, and the seats against each other: one label and one
/// position per seat of a row.
#[derive(Default)]
struct Checker {
    labels: HashSet<(String, String, String)>,
    positions: HashMap<(String, String, i32), String>,
}

impl Checker {
    #[allow(clippy::too_many_arguments)]
    fn seat(
        &mut self,
        section: &str,
        row: &str,
        label: &str,
        pos: &str,
        class: &str,
        price: &str,
        for_sale: &str,
    ) -> Result<VenueSeat, (ErrorCode, String)> {
        for (name, value, max) in
            [("section", section, MAX_SECTION_CHARS), ("row", row, MAX_LABEL_CHARS), ("seat", label, MAX_LABEL_CHARS)]
        {
            if value.is_empty() {
                return Err((ErrorCode::MissingField, format!("{name}: empty")));
            }
            if let Some(reason) = validate::label_error(name, value, max) {
                return Err((ErrorCode::InvalidLabel, reason));
            }
        }
        let pos = match pos.parse::<i32>() {
            Ok(p) if p > 0 => p,
            _ => return Err((ErrorCode::InvalidPosition, format!("pos: {pos:?} is not a whole number from 1"))),
        };
        let class = match class.parse::<i16>() {
            Ok(c) if c > 0 => c,
            _ => {
                return Err((
                    ErrorCode::InvalidClass,
                    format!("class: {class:?} is not a whole number from 1 to {}", i16::MAX),
                ));
            }
        };
        let Some(price_cents) = cents(price) else {
            return Err((ErrorCode::InvalidPrice, format!("price: {price:?} is not an amount like 42 or 42.50")));
        };
        let for_sale = match for_sale.to_ascii_lowercase().as_str() {
            "yes" | "y" | "true" | "1" => true,
            "no" | "n" | "false" | "0" => false,
            _ => return Err((ErrorCode::InvalidForSale, format!("for_sale: {for_sale:?} is not yes or no"))),
        };
        let key = (section.to_string(), row.to_string(), label.to_string());
        if self.labels.contains(&key) {
            return Err((ErrorCode::DuplicateSeat, format!("{section}, row {row}: seat {label} is listed twice")));
        }
        let place = (section.to_string(), row.to_string(), pos);
        if let Some(other) = self.positions.get(&place) {
            return Err((
                ErrorCode::DuplicatePosition,
                format!("{section}, row {row}: seat {label} is at position {pos}, as seat {other} is"),
            ));
        }
        self.labels.insert(key);
        self.positions.insert(place, label.to_string());
        Ok(VenueSeat {
            section: section.to_string(),
            row_label: row.to_string(),
            label: label.to_string(),
            pos,
            class,
            price_cents,
            for_sale,
        })
    }
}

/// "42", "42.5" or "42.50" as cents; None for anything else (negative, more
/// than two decimals, too large).
fn cents(price: &str) -> Option<i32> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (units, fraction) = match price.split_once('.') {
        Some((units, fraction)) if digits(fraction) => (units, fraction),
        Some(_) => return None,
        None => (price, ""),
    };
    if !digits(units) || fraction.len() > 2 {
        return None;
    }
    let units: i32 = units.parse().ok()?;
    let fraction: i32 = if fraction.is_empty() { 0 } else { format!("{fraction:0<2}").parse().ok()? };
    units.checked_mul(100)?.checked_add(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "section,row,seat,pos,class,price,for_sale\n";

    #[test]
    fn prices() {
        assert_eq!(cents("42"), Some(4200));
        assert_eq!(cents("42.5"), Some(4250));
        assert_eq!(cents("0.05"), Some(5));
        for bad in ["", "-1", "4.255", "x", "1.", ".5", "99999999999"] {
            assert_eq!(cents(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_lines_are_reported_by_number() {
        let file = format!(
            "{HEADER}Stalls,A,1,1,1,40.00,yes\nStalls,A,2,2,1,4O.00,yes\nStalls,A,1,3,1,40,yes\nStalls,A,4,1,1,40,yes\n\
             Stalls,A,5,0,1,40,yes\nStalls,A,6,6,1,40\nStalls,A,7,7,1,40,maybe\n"
        );
        let v = parse_csv(file.as_bytes()).expect("parse");
        let got: Vec<(usize, &str)> = v.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(
            got,
            [
                (3, "invalid_price"),
                (4, "duplicate_seat"),
                (5, "duplicate_position"),
                (6, "invalid_position"),
                (7, "invalid_line"),
                (8, "invalid_for_sale")
            ]
        );
        assert_eq!(v.seats.len(), 1);
    }

    #[test]
    fn quoted_fields_may_hold_commas_and_quotes_but_no_line_break() {
        let file = format!(
            "\u{feff}{HEADER}# the boxes\n\n\"Box A, left\",1,1,1,4,85.00,yes\n\"Box A, left\", 1 ,2,2,4, 85 ,no\n\
             \"The \"\"Royal\"\" box\",1,1,1,4,85,yes\nStalls,A,1,1,2,\"1,000\",yes\n\"Gallery\nEast\",A,1,1,3,10,yes\n\n\
             Gallery,A,2,x,3,10,yes\n"
        );
        let v = parse_csv(file.as_bytes()).expect("parse");
        // The price with a comma is refused (line 7); a quoted line break
        // (8-9) is refused on both its lines; the bad position is reported
        // on its own line (11), after a blank line.
        let bad: Vec<(usize, &str)> = v.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(bad, [(7, "invalid_price"), (8, "invalid_line"), (9, "invalid_line"), (11, "invalid_position")]);
        let seats: Vec<(&str, &str, &str, i32, bool)> = v
            .seats
            .iter()
            .map(|s| (s.section.as_str(), s.row_label.as_str(), s.label.as_str(), s.price_cents, s.for_sale))
            .collect();
        assert_eq!(
            seats,
            [
                ("Box A, left", "1", "1", 8500, true),
                ("Box A, left", "1", "2", 8500, false),
                ("The \"Royal\" box", "1", "1", 8500, true),
            ]
        );
    }

    #[test]
    fn lines_are_counted_through_crlf_comments_and_blank_lines() {
        let file = "section,row,seat,pos,class,price,for_sale\r\n\r\n# comment\r\nStalls,A,1,1,1,40,yes\r\n\
                    # another, with a \"quote\r\n\r\n\r\nStalls,A,2,1,1,40,yes\r\nStalls,A,3,3,1,40";
        let v = parse_csv(file.as_bytes()).expect("parse");
        let bad: Vec<(usize, &str)> = v.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(bad, [(8, "duplicate_position"), (9, "invalid_line")]);
        assert_eq!(v.seats.len(), 1);
    }

    #[test]
    fn a_missing_column_is_reported_on_the_header() {
        let v = parse_csv("section,row,seat,pos,class,price\nStalls,A,1,1,1,40\n".as_bytes()).expect("parse");
        assert_eq!(v.bad.len(), 1);
        assert_eq!((v.bad[0].line, v.bad[0].code.as_str()), (1, "missing_column"));
        // A byte-order mark before the header is no part of its first column.
        let v = parse_csv("\u{feff}section,row,seat,pos,class,price,for_sale\nStalls,A,1,1,1,40,yes\n".as_bytes())
            .expect("parse");
        assert!(v.bad.is_empty(), "{:?}", v.bad);
        assert_eq!(v.seats.len(), 1);
    }

    #[test]
    fn a_venue_without_seats_is_refused() {
        let v = parse_csv(HEADER.as_bytes()).expect("parse");
        let bad: Vec<(usize, &str)> = v.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(bad, [(1, "no_seats")]);
        let v = parse_json(r#"{"name": "Empty", "seats": []}"#.as_bytes()).expect("parse");
        let bad: Vec<(usize, &str)> = v.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(bad, [(1, "no_seats")]);
    }

    #[test]
    fn labels_are_bounded_and_plain_text() {
        let long = "x".repeat(100_000);
        let file = format!(
            "{HEADER}Stalls,A,1,1,1,40,yes\nStalls,A,{long},2,1,40,yes\n{},A,3,3,1,40,yes\n\
             Stalls,A,4\u{202e}gpj,4,1,40,yes\nStalls,B\u{0},5,5,1,40,yes\nStalls,A,6,6,1,40,yes\n",
            "S".repeat(101)
        );
        let v = parse_csv(file.as_bytes()).expect("parse");
        let bad: Vec<(usize, &str, &str)> =
            v.bad.iter().map(|b| (b.line, b.code.as_str(), b.reason.as_str())).collect();
        assert_eq!(
            bad,
            [
                (3, "invalid_label", "seat: 100000 characters; at most 40"),
                (4, "invalid_label", "section: 101 characters; at most 100"),
                (5, "invalid_label", "seat: must not contain a control or bidirectional formatting character (U+202E)"),
                (6, "invalid_label", "row: must not contain a control or bidirectional formatting character (U+0000)"),
            ]
        );
        // Every reason is bounded, whatever the input's length.
        assert!(v.bad.iter().all(|b| b.reason.len() < 200), "{:?}", v.bad);
        assert_eq!(v.seats.len(), 2);
        // Labels in any script are text like any other.
        let file = format!(
            "{HEADER}Партер,А,1,1,1,40,yes\n一楼,甲,二,2,1,40,yes\nالصالة,أ,٣,3,1,40,yes\nबालकनी,क,४,4,1,40,yes\n"
        );
        let v = parse_csv(file.as_bytes()).expect("parse");
        assert!(v.bad.is_empty(), "{:?}", v.bad);
        assert_eq!(v.seats.len(), 4);
    }

    #[test]
    fn an_event_must_hold_together() {
        let at = |s: &str| Some(s.parse::<DateTime<Utc>>().expect("time"));
        let ok = NewEvent { name: "Hamlet".into(), ..NewEvent::default() };
        assert_eq!(ok.check(), Ok(()));
        let cases = [
            (NewEvent { name: "  ".into(), ..ok.clone() }, "name: empty"),
            (NewEvent { name: "n".repeat(201), ..ok.clone() }, "name: 201 characters; at most 200"),
            (NewEvent { venue: Some("The \u{202e}Globe".into()), ..ok.clone() }, "venue: must not contain"),
            (
                NewEvent {
                    sales_from: at("2030-02-01T00:00:00Z"),
                    sales_until: at("2030-01-01T00:00:00Z"),
                    ..ok.clone()
                },
                "sales_until: sales would close",
            ),
            (
                NewEvent {
                    sales_from: at("2030-02-01T00:00:00Z"),
                    starts_at: at("2030-01-01T00:00:00Z"),
                    ..ok.clone()
                },
                "starts_at: sales would close",
            ),
            (NewEvent { per_customer: Some(0), ..ok.clone() }, "per_customer: 0"),
        ];
        for (event, starts) in cases {
            let refused = event.check().expect_err(starts);
            assert_eq!(refused.code, ErrorCode::InvalidEvent, "{refused}");
            assert!(refused.message.starts_with(starts), "{starts}: {refused}");
        }
        // Sales may go on past the start (at the door), if sales_until says so.
        let late = NewEvent {
            starts_at: at("2030-01-01T19:00:00Z"),
            sales_from: at("2029-12-01T00:00:00Z"),
            sales_until: at("2030-01-01T21:00:00Z"),
            ..ok
        };
        assert_eq!(late.check(), Ok(()));
    }

    #[test]
    fn json_carries_the_event() {
        let v = parse_json(
            r#"{"name": "Hamlet", "venue": "The Globe", "starts_at": "2030-01-01T19:30:00Z",
                "seats": [{"section": "Stalls", "row": "A", "seat": 1, "pos": 1, "class": 1, "price": 40},
                          {"section": "Stalls", "row": "A", "seat": "2", "pos": 2, "class": 1, "price": "40.5",
                           "for_sale": false}]}"#
                .as_bytes(),
        )
        .expect("parse");
        assert!(v.bad.is_empty(), "{:?}", v.bad);
        assert_eq!(v.event.as_ref().map(|e| e.name.as_str()), Some("Hamlet"));
        assert_eq!(v.seats[1].price_cents, 4050);
        assert!(!v.seats[1].for_sale);
    }
}
