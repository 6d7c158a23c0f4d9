//! Outcome files: one line's outcome ([`PartyOutcome`], with its
//! [`PartyStatus`]), written one a line as JSON lines or CSV
//! ([`OutcomeWriter`]). A batch's parties are given back this way, whether
//! streamed as they finish, read back from the database, or refused before
//! being enqueued. On the file readers: imports [`crate::bulk`] only.

use std::io::Write;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bulk::{Format, Ref};
use crate::outcome::{BookingResult, BookingState, RequestRecord, Status};

/// The error code of a good line not enqueued because the run enqueued
/// nothing ([`Batch::not_submitted`](crate::Batch::not_submitted)).
pub const NOT_SUBMITTED: &str = "not_submitted";

/// Where one line of a batch stands: a request's status, or `refused` for a
/// line never enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartyStatus {
    Queued,
    /// On its event's waiting list (the line asked to wait).
    Waiting,
    Succeeded,
    Failed,
    Dead,
    /// Not enqueued: the line is not a valid request, shares its ref with
    /// another, or reuses a key for another request; or the batch was not
    /// enqueued at all ([`NOT_SUBMITTED`]).
    Refused,
}

impl PartyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PartyStatus::Queued => "queued",
            PartyStatus::Waiting => "waiting",
            PartyStatus::Succeeded => "succeeded",
            PartyStatus::Failed => "failed",
            PartyStatus::Dead => "dead",
            PartyStatus::Refused => "refused",
        }
    }
}

impl std::fmt::Display for PartyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Status> for PartyStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Queued => PartyStatus::Queued,
            Status::Waiting => PartyStatus::Waiting,
            Status::Succeeded => PartyStatus::Succeeded,
            Status::Failed => PartyStatus::Failed,
            Status::Dead => PartyStatus::Dead,
        }
    }
}

/// One line's outcome: a line of an outcome file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartyOutcome {
    /// The line of the file (or place in the batch), from 1.
    pub line: Option<usize>,
    /// The submitter's own reference for the line, as the line gave it.
    #[serde(rename = "ref")]
    pub reference: Option<Ref>,
    /// The request (none for a refused line).
    pub id: Option<i64>,
    pub status: PartyStatus,
    /// The event and class asked for, as the request names them.
    pub event: Option<i64>,
    pub class: Option<i16>,
    /// Succeeded: the booking, its seats with their labels, the total and,
    /// for a hold, until when it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booking: Option<BookingResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

impl PartyOutcome {
    /// The outcome of a request as it stands, with its stored line and ref.
    pub fn of(record: &RequestRecord) -> PartyOutcome {
        let (event, class) = event_and_class(&record.payload);
        PartyOutcome {
            line: record.batch_line.and_then(|l| usize::try_from(l).ok()),
            reference: record.batch_ref.clone().map(Ref::from),
            id: Some(record.id),
            status: record.status.into(),
            event,
            class,
            booking: record.booking(),
            error_code: record.error_code.clone(),
            error_message: record.error_message.clone(),
        }
    }

    /// Seats the party holds or has booked.
    pub fn seats(&self) -> usize {
        match &self.booking {
            Some(b) if b.state.seats().is_some() => b.seats.len(),
            _ => 0,
        }
    }

    /// Whether the party did not get what it asked for: failed, dead or refused.
    pub fn is_failure(&self) -> bool {
        matches!(self.status, PartyStatus::Failed | PartyStatus::Dead | PartyStatus::Refused)
    }
}

/// The event and class a payload names, if it names them as integers.
pub(crate) fn event_and_class(payload: &Value) -> (Option<i64>, Option<i16>) {
    let int = |field: &str| payload.get(field).and_then(Value::as_i64);
    (int("event"), int("class").and_then(|c| i16::try_from(c).ok()))
}

/// The columns of a CSV outcome file, in order.
pub const OUTCOME_COLUMNS: [&str; 14] = [
    "line",
    "ref",
    "id",
    "status",
    "event",
    "class",
    "booking",
    "state",
    "seats",
    "seat_labels",
    "total",
    "held_until",
    "error_code",
    "error_message",
];

/// Writes outcomes, one a line: JSON lines ([`PartyOutcome`] as JSON), or
/// CSV with a header ([`OUTCOME_COLUMNS`]: the booking flattened, its seat
/// numbers space-separated, their labels as `section, row R, seat S`
/// separated by `; `, the total in currency units).
pub struct OutcomeWriter<W: Write> {
    out: Out<W>,
}

enum Out<W: Write> {
    Jsonl(W),
    /// Boxed: the CSV writer holds its buffer inline.
    Csv(Box<csv::Writer<W>>),
}

impl<W: Write> std::fmt::Debug for OutcomeWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let format = match self.out {
            Out::Jsonl(_) => "jsonl",
            Out::Csv(_) => "csv",
        };
        f.debug_struct("OutcomeWriter").field("format", &format).finish_non_exhaustive()
    }
}

impl<W: Write> OutcomeWriter<W> {
    /// A writer of `format` on `out` (CSV: the header is written at once).
    pub fn new(format: Format, out: W) -> std::io::Result<OutcomeWriter<W>> {
        let out = match format {
            Format::Jsonl => Out::Jsonl(out),
            Format::Csv => {
                let mut csv = csv::Writer::from_writer(out);
                csv.write_record(OUTCOME_COLUMNS)?;
                Out::Csv(Box::new(csv))
            }
        };
        Ok(OutcomeWriter { out })
    }

    pub fn write(&mut self, outcome: &PartyOutcome) -> std::io::Result<()> {
        match &mut self.out {
            Out::Jsonl(out) => {
                serde_json::to_writer(&mut *out, outcome)?;
                out.write_all(b"\n")
            }
            Out::Csv(csv) => Ok(csv.write_record(csv_record(outcome))?),
        }
    }

    /// Flush, and give the underlying writer back.
    pub fn finish(self) -> std::io::Result<W> {
        match self.out {
            Out::Jsonl(mut out) => {
                out.flush()?;
                Ok(out)
            }
            Out::Csv(csv) => csv.into_inner().map_err(|e| e.into_error()),
        }
    }
}

/// An outcome as the cells of [`OUTCOME_COLUMNS`].
pub(crate) fn csv_record(o: &PartyOutcome) -> [String; 14] {
    let text = |v: Option<String>| v.unwrap_or_default();
    let b = o.booking.as_ref();
    let seats = b.map(|b| b.seats.iter().map(|s| s.seat.to_string()).collect::<Vec<_>>().join(" "));
    let labels = b.map(|b| b.seats.iter().map(crate::SeatInfo::place).collect::<Vec<_>>().join("; "));
    [
        text(o.line.map(|l| l.to_string())),
        text(o.reference.as_ref().map(Ref::to_string)),
        text(o.id.map(|i| i.to_string())),
        o.status.to_string(),
        text(o.event.map(|e| e.to_string())),
        text(o.class.map(|c| c.to_string())),
        text(b.map(|b| b.booking.to_string())),
        text(b.map(|b| BookingState::as_str(b.state).to_string())),
        text(seats),
        text(labels),
        text(b.map(|b| seatq_core::outcome::money(b.total_cents))),
        text(b.and_then(|b| b.held_until).map(|t| t.to_rfc3339())),
        text(o.error_code.clone()),
        text(o.error_message.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_outcomes_have_a_header_and_a_line_each() {
        let mut out = OutcomeWriter::new(Format::Csv, Vec::new()).expect("writer");
        let refused = PartyOutcome {
            line: Some(4),
            reference: Some("A, 1".into()),
            id: None,
            status: PartyStatus::Refused,
            event: None,
            class: None,
            booking: None,
            error_code: Some("invalid_json".into()),
            error_message: Some("expected value".into()),
        };
        out.write(&refused).expect("write");
        let text = String::from_utf8(out.finish().expect("finish")).expect("UTF-8");
        assert_eq!(
            text,
            format!("{}\n4,\"A, 1\",,refused,,,,,,,,,invalid_json,expected value\n", OUTCOME_COLUMNS.join(","))
        );
    }
}
