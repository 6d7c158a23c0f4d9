//! Bulk files: one request per line, as JSON lines
//! `{"kind": …, "payload": {…}, "ref"?: …, "idempotency_key"?: …, "priority"?: …, "run_at"?: "<RFC 3339 time>"}`
//! or as CSV (see [`parse_csv`]). `ref` is the submitter's own reference for
//! the line (a string or an integer), which its outcome carries back as it
//! was given ([`Ref`]). Every line is parsed and validated before anything is
//! enqueued, so a bad line (not UTF-8, not JSON or CSV, not a valid request)
//! is reported with its number and reason and never half enqueued.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::lines::{self, BadLine, Dialect, Refusal, numbered_lines};
use crate::new_request::{self, NewRequest};
use crate::outcome::ErrorCode;
use crate::request::Request;
use crate::{RequestError, json, validate};

/// The two forms of a request file (and of an outcome file, [`crate::OutcomeWriter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object a line.
    Jsonl,
    /// A header line naming the columns, then one request a line.
    Csv,
}

impl Format {
    /// The form a file's name says: `.csv` is CSV, `.jsonl`, `.ndjson` and
    /// `.json` are JSON lines (any case); `None` for any other name.
    pub fn of_path(path: &str) -> Option<Format> {
        let extension = std::path::Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" | "json" => Some(Format::Jsonl),
            _ => None,
        }
    }

    /// Parse a request file of this form.
    pub fn parse(self, reader: impl BufRead) -> std::io::Result<Parsed> {
        match self {
            Format::Jsonl => parse(reader),
            Format::Csv => parse_csv(reader),
        }
    }
}

/// A line's `ref`, the submitter's own reference for a party, as the file
/// gave it: text, or an integer (JSON lines `"ref": 7`), which its outcome
/// gives back as an integer. Either way the ref is its text: the party's key
/// derives from it and the database keeps it (`batch_ref` is text), so `7`
/// and `"7"` are one ref, and a batch read back from the database
/// ([`Client::batch_results`](crate::Client::batch_results)) has every ref as text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    text: String,
    integer: bool,
}

impl Ref {
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether it was given as an integer.
    pub fn is_integer(&self) -> bool {
        self.integer
    }
}

impl std::ops::Deref for Ref {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Ref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<String> for Ref {
    fn from(text: String) -> Ref {
        Ref { text, integer: false }
    }
}

impl From<&str> for Ref {
    fn from(text: &str) -> Ref {
        Ref::from(text.to_string())
    }
}

impl From<i64> for Ref {
    fn from(n: i64) -> Ref {
        Ref { text: n.to_string(), integer: true }
    }
}

impl From<u64> for Ref {
    fn from(n: u64) -> Ref {
        Ref { text: n.to_string(), integer: true }
    }
}

impl Serialize for Ref {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.integer {
            if let Ok(n) = self.text.parse::<i64>() {
                return s.serialize_i64(n);
            }
            if let Ok(n) = self.text.parse::<u64>() {
                return s.serialize_u64(n);
            }
        }
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Ref {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ref, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Text(String),
            Signed(i64),
            Unsigned(u64),
        }
        Ok(match Given::deserialize(d)? {
            Given::Text(text) => Ref::from(text),
            Given::Signed(n) => Ref::from(n),
            Given::Unsigned(n) => Ref::from(n),
        })
    }
}

/// One line of a bulk file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    kind: String,
    payload: Value,
    #[serde(default, rename = "ref")]
    reference: Option<Value>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    priority: i16,
    #[serde(default)]
    run_at: Option<DateTime<Utc>>,
}

/// A parsed bulk file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Valid requests, in file order.
    pub good: Vec<NewRequest>,
    /// The line number of each of `good`.
    pub lines: Vec<usize>,
    pub bad: Vec<BadLine>,
    /// The `ref` of every line that gives one (bad lines too, so that their
    /// outcome can name it), by line number.
    pub refs: BTreeMap<usize, Ref>,
}

impl Parsed {
    /// Add one line: its request, or why it is bad; and its ref.
    fn push(&mut self, line: usize, reference: Option<Ref>, request: Result<NewRequest, RequestError>) {
        match request {
            Ok(request) => {
                self.good.push(request);
                self.lines.push(line);
            }
            Err(e) => self.bad.push(BadLine { line, code: e.code(), reason: e.message }),
        }
        if let Some(reference) = reference {
            self.refs.insert(line, reference);
        }
    }

    /// Move the requests of `good` at these positions (with why each is
    /// refused, e.g. from [`crate::Client::idempotency_conflicts`]) to `bad`,
    /// by line number; `bad` stays in line order.
    pub fn refuse(&mut self, refused: Vec<(usize, crate::RequestError)>) {
        let mut refused: std::collections::BTreeMap<usize, crate::RequestError> = refused.into_iter().collect();
        let good = std::mem::take(&mut self.good);
        let lines = std::mem::take(&mut self.lines);
        for (i, (new, line)) in good.into_iter().zip(lines).enumerate() {
            match refused.remove(&i) {
                Some(e) => self.bad.push(BadLine { line, code: e.code(), reason: e.message }),
                None => {
                    self.good.push(new);
                    self.lines.push(line);
                }
            }
        }
        self.bad.sort_by_key(|b| b.line);
    }
}

/// Parse and validate every line (blank lines are skipped). Only an I/O
/// error reading the file fails the whole parse; a line that is not valid
/// UTF-8 is a bad line like any other.
pub fn parse(reader: impl BufRead) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    for numbered in numbered_lines(reader) {
        let (n, line) = numbered?;
        let bad = |code: ErrorCode, reason: String| BadLine { line: n, code, reason };
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                parsed.bad.push(bad(ErrorCode::InvalidJson, format!("not valid UTF-8: {e}")));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match json::from_str::<Line>(&line) {
            Err(e) => parsed.bad.push(bad(e.code(), e.reason())),
            Ok(l) => {
                let reference = l.reference.as_ref().map(json_ref).transpose();
                let known = reference.as_ref().ok().cloned().flatten();
                let request =
                    reference.and_then(|_| new_request(&l.kind, &l.payload, l.idempotency_key, l.priority, l.run_at));
                parsed.push(n, known, request);
            }
        }
    }
    Ok(parsed)
}

/// A line's `ref`: a string, or an integer (remembered as one, so that its
/// outcome gives it back as one).
fn json_ref(v: &Value) -> Result<Ref, RequestError> {
    let reference = match v {
        Value::String(s) => Some(Ref::from(s.as_str())),
        Value::Number(n) => n.as_i64().map(Ref::from).or_else(|| n.as_u64().map(Ref::from)),
        _ => None,
    };
    let Some(reference) = reference else {
        // Named by its kind, or a scalar by its text: never a whole array or object.
        let got = match v {
            Value::Array(_) => "an array".to_string(),
            Value::Object(_) => "an object".to_string(),
            scalar => scalar.to_string(),
        };
        let message = format!("ref: expected a string or an integer, got {got}");
        return Err(RequestError { code: ErrorCode::WrongType, message });
    };
    new_request::check_ref(&reference)?;
    Ok(reference)
}

/// A line's request, checked, with its queue options.
fn new_request(
    kind: &str,
    payload: &Value,
    idempotency_key: Option<String>,
    priority: i16,
    run_at: Option<DateTime<Utc>>,
) -> Result<NewRequest, RequestError> {
    validate::check_new(kind, payload, idempotency_key.as_deref(), run_at)?;
    let request = Request::decode(kind, payload)?;
    Ok(NewRequest { request, idempotency_key, priority, run_at, batch: None })
}

/// How a CSV cell of a payload column is read.
#[derive(Clone, Copy)]
enum Cell {
    Integer,
    Boolean,
    /// Seat numbers, separated by spaces, commas or semicolons.
    Integers,
    Text,
}

/// The payload columns of a CSV request file, each a field of the payload.
const PAYLOAD_COLUMNS: [(&str, Cell); 9] = [
    ("event", Cell::Integer),
    ("class", Cell::Integer),
    ("party", Cell::Integer),
    ("customer", Cell::Text),
    ("seats", Cell::Integers),
    ("partial", Cell::Boolean),
    ("together", Cell::Boolean),
    ("hold_seconds", Cell::Integer),
    ("booking", Cell::Integer),
];

/// The other columns of a CSV request file: the line's own.
const LINE_COLUMNS: [&str; 5] = ["kind", "ref", "idempotency_key", "priority", "run_at"];

/// Parse a CSV request file: a header line naming the columns (any order,
/// any case): `kind` (required), `ref`, `idempotency_key`, `priority`,
/// `run_at`, and the payload's fields as columns (`event`, `class`, `party`,
/// `customer`, `seats`, `partial`, `together`, `hold_seconds`, `booking`),
/// then one request a line. An empty cell is an absent field; `seats` lists
/// seat numbers separated by spaces (or semicolons, or commas in a quoted
/// cell); `partial` and `together` are yes/no (true/false, 1/0). Cells are
/// read as CSV does (RFC 4180 quoting), except that a record may not run over
/// a line break: no field may hold one, so a quote left open is refused on
/// its line, and each line it swallowed on its own. A header naming any
/// other column is `unknown_column`. A cell that does not read as its
/// column's type is passed on as text, so the line is refused naming the
/// field, as a JSON line would be. Only an I/O error fails the whole parse.
pub fn parse_csv(reader: impl Read) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    let records = lines::records(reader, Dialect { lenient: false })?;
    let no_header = "no header line (kind, and the payload's fields as columns)";
    let (columns, lines) = match lines::after_header(records, csv_header, no_header) {
        Ok(read) => read,
        Err(bad) => {
            parsed.bad = bad;
            return Ok(parsed);
        }
    };
    for line in lines {
        match line {
            Err(bad) => parsed.bad.push(bad),
            Ok((n, cells)) if cells.len() != columns.len() => {
                let reason = format!("{} fields, the header has {}", cells.len(), columns.len());
                parsed.bad.push(BadLine { line: n, code: ErrorCode::InvalidLine, reason });
            }
            Ok((n, cells)) => {
                let (reference, request) = csv_line(&columns, &cells);
                parsed.push(n, reference, request);
            }
        }
    }
    Ok(parsed)
}

/// The columns a header names, in lower case; each known, none twice, `kind`
/// among them. A column that is neither the line's nor a payload field is
/// refused as `unknown_column` rather than ignored: a misspelt `cutsomer`
/// would otherwise send every party without its customer.
fn csv_header(cells: &[String]) -> Result<Vec<String>, Refusal> {
    let known = |c: &str| LINE_COLUMNS.contains(&c) || PAYLOAD_COLUMNS.iter().any(|(p, _)| *p == c);
    let mut columns: Vec<String> = Vec::with_capacity(cells.len());
    for cell in cells {
        let column = cell.trim().to_ascii_lowercase();
        if !known(&column) {
            let payload: Vec<&str> = PAYLOAD_COLUMNS.iter().map(|(p, _)| *p).collect();
            let reason = format!(
                "header: unknown column {} (the known columns are {} and the payload's {})",
                crate::validate::quoted(cell),
                LINE_COLUMNS.join(", "),
                payload.join(", ")
            );
            return Err(Refusal { code: ErrorCode::UnknownColumn, reason });
        }
        if columns.contains(&column) {
            return Err(format!("header: column {column:?} twice").into());
        }
        columns.push(column);
    }
    if !columns.iter().any(|c| c == "kind") {
        return Err(String::from("header: no column \"kind\"").into());
    }
    Ok(columns)
}

/// One CSV line: its ref, and its request or why it is bad.
fn csv_line(columns: &[String], cells: &[String]) -> (Option<Ref>, Result<NewRequest, RequestError>) {
    let mut payload = Map::new();
    let (mut kind, mut reference, mut key, mut priority, mut run_at) = ("", None, None, 0, None);
    let invalid = |message: String| RequestError { code: ErrorCode::InvalidRequest, message };
    let mut error = None;
    for (column, cell) in columns.iter().zip(cells) {
        let cell = cell.trim();
        if cell.is_empty() {
            continue;
        }
        match column.as_str() {
            "kind" => kind = cell,
            "ref" => reference = Some(cell.to_string()),
            "idempotency_key" => key = Some(cell.to_string()),
            "priority" => match cell.parse() {
                Ok(p) => priority = p,
                Err(_) => error = error.or(Some(invalid(format!("priority: {cell:?} is not -32768 to 32767")))),
            },
            "run_at" => match DateTime::parse_from_rfc3339(cell) {
                Ok(t) => run_at = Some(t.with_timezone(&Utc)),
                Err(e) => error = error.or(Some(invalid(format!("run_at: {cell:?} is not an RFC 3339 time: {e}")))),
            },
            field => {
                let how = PAYLOAD_COLUMNS.iter().find(|(p, _)| *p == field).map_or(Cell::Text, |(_, how)| *how);
                payload.insert(field.to_string(), csv_value(cell, how));
            }
        }
    }
    let checked_ref = reference.as_deref().map(new_request::check_ref).transpose();
    let request = match (error, checked_ref) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(_)) => new_request(kind, &Value::Object(payload), key, priority, run_at),
    };
    (reference.map(Ref::from), request)
}

/// A cell as its column's type, or as text if it does not read as one.
fn csv_value(cell: &str, how: Cell) -> Value {
    let integer = |text: &str| text.parse::<i64>().map_or_else(|_| Value::from(text), Value::from);
    match how {
        Cell::Integer => integer(cell),
        Cell::Boolean => match cell.to_ascii_lowercase().as_str() {
            "yes" | "true" | "1" => Value::Bool(true),
            "no" | "false" | "0" => Value::Bool(false),
            _ => Value::from(cell),
        },
        Cell::Integers => Value::Array(cell.split([' ', ',', ';']).filter(|s| !s.is_empty()).map(integer).collect()),
        Cell::Text => Value::from(cell),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_are_requests_with_their_refs() {
        // A-2's quoted customer spans two lines: no field may hold a line
        // break, so the record is refused on its first line and the line it
        // swallowed on its own; the lines after it keep their numbers.
        let file = "\u{feff}Ref,kind,event,class,party,customer,seats,together,priority\n\
                    A-1,book,1,2,3,Smith party,,yes,5\n\
                    \r\n\
                    A-2,hold,1,,,\"Jones,\nJ.\",\"4, 5\",,\n\
                    A-3,book,1,2,twelve,Lee,,,\n\
                    A-4,book,1,2,3\n\
                    ,book,1,2,30,Kim,,,\n\
                    A-5,hold,1,,,\"Jones, J.\",\"4, 5\",,\n";
        let parsed = parse_csv(file.as_bytes()).expect("parse");
        assert_eq!(parsed.lines, [2, 9], "{:?}", parsed.bad);
        let payloads: Vec<Value> = parsed.good.iter().map(|g| g.request.payload()).collect();
        assert_eq!(payloads[0]["customer"], "Smith party");
        assert_eq!(payloads[0]["together"], true);
        assert_eq!(parsed.good[0].priority, 5);
        assert_eq!(payloads[1]["seats"], serde_json::json!([4, 5]));
        assert_eq!(payloads[1]["customer"], "Jones, J.");
        let bad: Vec<(usize, &str)> = parsed.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(
            bad,
            [
                (4, "invalid_line"),
                (5, "invalid_line"),
                (6, "wrong_type"),
                (7, "invalid_line"),
                (8, "party_out_of_range")
            ]
        );
        assert_eq!(
            parsed.bad[0].reason,
            "a quote opened on line 4 is not closed until line 5: lines 4-5 read as one record"
        );
        assert_eq!(parsed.bad[1].reason, "swallowed by the unclosed quote on line 4");
        assert!(parsed.bad[2].reason.starts_with("party:"), "{:?}", parsed.bad[2]);
        let refs: Vec<(usize, &str)> = parsed.refs.iter().map(|(l, r)| (*l, r.as_str())).collect();
        assert_eq!(refs, [(2, "A-1"), (6, "A-3"), (9, "A-5")]);
    }

    #[test]
    fn a_csv_header_must_name_known_columns_and_kind() {
        for (header, code, reason) in [
            (
                "kind,event,colour\n",
                "unknown_column",
                "header: unknown column \"colour\" (the known columns are kind, ",
            ),
            ("Cutsomer,kind\n", "unknown_column", "header: unknown column \"Cutsomer\" (the known columns are kind, "),
            ("event,class\n", "missing_column", "header: no column \"kind\""),
            ("kind,kind\n", "missing_column", "header: column \"kind\" twice"),
        ] {
            let parsed = parse_csv(format!("{header}book,1\n").as_bytes()).expect("parse");
            assert_eq!(parsed.bad.len(), 1, "{header}");
            assert_eq!((parsed.bad[0].line, parsed.bad[0].code.as_str()), (1, code), "{header}");
            assert!(parsed.bad[0].reason.starts_with(reason), "{:?}", parsed.bad[0]);
            assert!(parsed.good.is_empty());
        }
        // The column named, cut short and escaped; every known one listed.
        for column in ["x".repeat(10_000), "cust\u{202e}omer".to_string()] {
            let parsed = parse_csv(format!("kind,{column}\nbook,1\n").as_bytes()).expect("parse");
            let reason = &parsed.bad[0].reason;
            assert_eq!(parsed.bad[0].code, "unknown_column");
            assert!(reason.len() < 500 && !reason.contains('\u{202e}'), "{reason}");
            for known in LINE_COLUMNS.iter().chain(PAYLOAD_COLUMNS.iter().map(|(c, _)| c)) {
                assert!(reason.contains(known), "{known} missing from {reason}");
            }
        }
    }

    #[test]
    fn a_quote_left_open_is_reported_with_every_line_it_swallowed() {
        // Nine parties; the stray quote on line 3 runs to line 8.
        let mut file = String::from("ref,kind,event,class,party,customer\n");
        for n in 2..=10 {
            let customer = if n == 3 {
                "\"Smith".to_string()
            } else if n == 8 {
                "Lee\"".to_string()
            } else {
                format!("c{n}")
            };
            file.push_str(&format!("P{n},book,1,1,2,{customer}\n"));
        }
        let parsed = parse_csv(file.as_bytes()).expect("parse");
        assert_eq!(parsed.lines, [2, 9, 10]);
        let bad: Vec<(usize, &str, &str)> =
            parsed.bad.iter().map(|b| (b.line, b.code.as_str(), b.reason.as_str())).collect();
        let opened = "a quote opened on line 3 is not closed until line 8: lines 3-8 read as one record";
        let swallowed = "swallowed by the unclosed quote on line 3";
        let expected: Vec<(usize, &str, &str)> =
            [(3, "invalid_line", opened)].into_iter().chain((4..=8).map(|n| (n, "invalid_line", swallowed))).collect();
        assert_eq!(bad, expected);

        // Never closed: to the end of the file, whose last line break starts
        // no line; a blank line swallowed is no line of the file's either.
        let parsed = parse_csv("kind,customer\nbook,\"Smith\n\nbook,Lee\r\nbook,Kim\n".as_bytes()).expect("parse");
        let bad: Vec<(usize, &str)> = parsed.bad.iter().map(|b| (b.line, b.reason.as_str())).collect();
        assert_eq!(
            bad,
            [
                (2, "a quote opened on line 2 is never closed: lines 2-5, to the end of the file, read as one record"),
                (4, "swallowed by the unclosed quote on line 2"),
                (5, "swallowed by the unclosed quote on line 2"),
            ]
        );
        assert!(parsed.good.is_empty());

        // Quotes as CSV reads them: a doubled one inside a quoted field, and
        // one inside an unquoted field, neither opens nor closes anything.
        let file = "kind,event,class,party,customer,ref\nbook,1,1,2,\"The \"\"Royal\"\" party\",R-1\n\
                    book,1,1,2,5\" Smith,R-2\nbook,1,1,2,Lee,\"R\n3\"\nbook,1,1,2,Kim,R-4\n";
        let parsed = parse_csv(file.as_bytes()).expect("parse");
        let bad: Vec<(usize, &str)> = parsed.bad.iter().map(|b| (b.line, b.reason.as_str())).collect();
        let opened = "a quote opened on line 4 is not closed until line 5: lines 4-5 read as one record";
        assert_eq!(bad, [(4, opened), (5, "swallowed by the unclosed quote on line 4")]);
        assert_eq!(parsed.lines, [2, 3, 6]);
    }

    #[test]
    fn formats_follow_the_extension() {
        assert_eq!(Format::of_path("a/parties.CSV"), Some(Format::Csv));
        assert_eq!(Format::of_path("parties.jsonl"), Some(Format::Jsonl));
        assert_eq!(Format::of_path("parties.txt"), None);
        assert_eq!(Format::of_path("-"), None);
    }
}
