//! Bulk files: one request per line, as JSON
//! `{"kind": …, "payload": {…}, "idempotency_key"?: …, "priority"?: …, "run_at"?: "<RFC 3339 time>"}`.
//! Every line is parsed and validated before anything is enqueued, so a bad
//! line (not UTF-8, not JSON, not a valid request) is reported with its
//! number and reason and never half enqueued.

use std::io::BufRead;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::client::NewRequest;
use crate::request::Request;
use crate::{json, validate};

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
    #[serde(default)]
    run_at: Option<DateTime<Utc>>,
}

/// A line that cannot be enqueued (or imported); serialised as
/// `{"line", "code", "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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
    /// The line number of each of `good`.
    pub lines: Vec<usize>,
    pub bad: Vec<BadLine>,
}

impl Parsed {
    /// Move the requests of `good` at these positions (with why each is
    /// refused, e.g. from [`crate::Client::idempotency_conflicts`]) to `bad`,
    /// by line number; `bad` stays in line order.
    pub fn refuse(&mut self, refused: Vec<(usize, crate::RequestError)>) {
        let mut refused: std::collections::BTreeMap<usize, crate::RequestError> = refused.into_iter().collect();
        let good = std::mem::take(&mut self.good);
        let lines = std::mem::take(&mut self.lines);
        for (i, (new, line)) in good.into_iter().zip(lines).enumerate() {
            match refused.remove(&i) {
                Some(e) => self.bad.push(BadLine { line, code: e.code().to_string(), reason: e.message }),
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
        let bad = |code: &str, reason: String| BadLine { line: n, code: code.to_string(), reason };
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                parsed.bad.push(bad("invalid_json", format!("not valid UTF-8: {e}")));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match json::from_str::<Line>(&line) {
            Err(e) => parsed.bad.push(bad(e.code(), e.reason())),
            Ok(l) => match validate::check_new(&l.kind, &l.payload, l.idempotency_key.as_deref(), l.run_at)
                .and_then(|()| Request::decode(&l.kind, &l.payload))
            {
                Ok(request) => {
                    parsed.good.push(NewRequest {
                        request,
                        idempotency_key: l.idempotency_key,
                        priority: l.priority,
                        run_at: l.run_at,
                    });
                    parsed.lines.push(n);
                }
                Err(e) => parsed.bad.push(bad(e.code(), e.message)),
            },
        }
    }
    Ok(parsed)
}

/// The lines of a file, numbered from 1, each without its line ending (and
/// the first without a byte-order mark, as some editors write one), or why
/// it is not UTF-8: what every line-by-line file reader here starts from.
pub(crate) fn numbered_lines(
    mut reader: impl BufRead,
) -> impl Iterator<Item = std::io::Result<(usize, Result<String, std::str::Utf8Error>)>> {
    let mut buf = Vec::new();
    let mut n = 0;
    std::iter::from_fn(move || {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Err(e) => return Some(Err(e)),
            Ok(0) => return None,
            Ok(_) => n += 1,
        }
        let mut bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if n == 1 {
            bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
        }
        Some(Ok((n, std::str::from_utf8(bytes).map(str::to_string))))
    })
}
