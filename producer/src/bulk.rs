//! Bulk files: one request per line, as JSON
//! `{"kind": …, "payload": {…}, "idempotency_key"?: …, "priority"?: …}`.
//! Every line is parsed and validated before anything is enqueued, so a bad
//! line (not UTF-8, not JSON, not a valid request) is reported with its
//! number and reason and never half enqueued.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value;

use crate::client::NewRequest;
use crate::request::Request;
use crate::validate;

/// One line of a bulk file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    kind: String,
    payload: Value,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    priority: i16,
}

/// A line that cannot be enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// The error code (`invalid_json` when the line is not a request object).
    pub code: String,
    pub reason: String,
}

/// A parsed bulk file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Valid requests, in file order.
    pub good: Vec<NewRequest>,
    pub bad: Vec<BadLine>,
}

/// Parse and validate every line (blank lines are skipped). Only an I/O
/// error reading the file fails the whole parse; a line that is not valid
/// UTF-8 is a bad line like any other.
pub fn parse(mut reader: impl BufRead) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    let mut buf = Vec::new();
    for n in 1.. {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let bad = |code: &str, reason: String| BadLine { line: n, code: code.to_string(), reason };
        let mut bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if n == 1 {
            // A byte-order mark, as some editors write.
            bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
        }
        let line = match std::str::from_utf8(bytes) {
            Ok(line) => line,
            Err(e) => {
                parsed.bad.push(bad("invalid_json", format!("not valid UTF-8: {e}")));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(line) {
            Err(e) => parsed.bad.push(bad("invalid_json", e.to_string())),
            Ok(l) => match Request::decode(&l.kind, &l.payload)
                .and_then(|r| l.idempotency_key.as_deref().map_or(Ok(()), validate::check_idempotency_key).map(|()| r))
            {
                Ok(request) => {
                    parsed.good.push(NewRequest { request, idempotency_key: l.idempotency_key, priority: l.priority })
                }
                Err(e) => parsed.bad.push(bad(e.code(), e.message)),
            },
        }
    }
    Ok(parsed)
}
