//! Bulk files: one request per line, as JSON
//! `{"kind": …, "payload": {…}, "idempotency_key"?: …, "priority"?: …}`.
//! Every line is parsed and validated before anything is enqueued, so a bad
//! line is reported with its number and reason and never half enqueued.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value;

use crate::client::NewRequest;
use crate::request::Request;

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

/// Parse and validate every line (blank lines are skipped).
pub fn parse(reader: impl BufRead) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |code: &str, reason: String| BadLine { line: n + 1, code: code.to_string(), reason };
        match serde_json::from_str::<Line>(&line) {
            Err(e) => parsed.bad.push(bad("invalid_json", e.to_string())),
            Ok(l) => match Request::decode(&l.kind, &l.payload) {
                Ok(request) => {
                    parsed.good.push(NewRequest { request, idempotency_key: l.idempotency_key, priority: l.priority })
                }
                Err(e) => parsed.bad.push(bad(e.code(), e.message)),
            },
        }
    }
    Ok(parsed)
}
