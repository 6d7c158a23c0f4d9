//! The outcome a batch records for each request it processed, as
//! [`crate::sql::claim::RECORD_OUTCOMES`] reads it: the fields are the columns of its
//! `jsonb_to_recordset`, so that a misspelt one is a compile error, not a
//! NULL. A field left out (`None`, `false`) reads as NULL, as the statement
//! expects.

use std::time::Duration;

use seatq_core::outcome::{BookingResult, ErrorCode, Status};
use serde::Serialize;

/// One request's outcome, bound (with the rest of its batch) as a JSON array.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub id: i64,
    pub status: Status,
    /// The booking, when succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<BookingResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Back in the queue: due again after this many milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<i64>,
    /// Contention retries to add to the request's count.
    pub contended: i32,
    /// Counts as a failed attempt.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub failed_attempt: bool,
}

impl Outcome {
    fn new(id: i64, status: Status, contended: i32) -> Outcome {
        Outcome {
            id,
            status,
            result: None,
            error_code: None,
            error_message: None,
            retry_in_ms: None,
            contended,
            failed_attempt: false,
        }
    }

    /// Done: seats changed as `booking` says.
    pub fn succeeded(id: i64, booking: BookingResult, contended: i32) -> Outcome {
        Outcome { result: Some(booking), ..Outcome::new(id, Status::Succeeded, contended) }
    }

    /// A final answer with a stable error code.
    pub fn failed(id: i64, code: ErrorCode, message: String, contended: i32) -> Outcome {
        Outcome { error_code: Some(code), error_message: Some(message), ..Outcome::new(id, Status::Failed, contended) }
    }

    /// Still contended after its last retry: back to the queue, due again
    /// after `delay`.
    pub fn requeued(id: i64, delay: Duration, contended: i32) -> Outcome {
        Outcome { retry_in_ms: Some(millis(delay)), ..Outcome::new(id, Status::Queued, contended) }
    }

    /// A failed attempt, to try again after `delay`.
    pub fn retry(id: i64, message: String, delay: Duration, contended: i32) -> Outcome {
        Outcome {
            error_code: Some(ErrorCode::Internal),
            error_message: Some(message),
            retry_in_ms: Some(millis(delay)),
            failed_attempt: true,
            ..Outcome::new(id, Status::Queued, contended)
        }
    }

    /// The last failed attempt allowed: `dead`.
    pub fn dead(id: i64, message: String, contended: i32) -> Outcome {
        Outcome {
            error_code: Some(ErrorCode::Internal),
            error_message: Some(message),
            failed_attempt: true,
            ..Outcome::new(id, Status::Dead, contended)
        }
    }

    /// Whether the request stays queued (rather than finishing).
    pub fn requeues(&self) -> bool {
        self.status == Status::Queued
    }
}

fn millis(d: Duration) -> i64 {
    d.as_millis() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use seatq_core::outcome::BookingState;
    use serde_json::json;

    #[test]
    fn serialises_as_the_statement_reads_it() {
        let as_json = |o: Outcome| serde_json::to_value(o).expect("JSON");
        let booking = BookingResult {
            booking: 5,
            event: 1,
            customer: "ann".into(),
            state: BookingState::Held,
            seats: Vec::new(),
            total_cents: 0,
            held_until: None,
            capped: false,
        };
        assert_eq!(
            as_json(Outcome::succeeded(1, booking.clone(), 2)),
            json!({"id": 1, "status": "succeeded", "result": booking, "contended": 2})
        );
        assert_eq!(
            as_json(Outcome::failed(1, ErrorCode::SoldOut, "none left".into(), 0)),
            json!({"id": 1, "status": "failed", "error_code": "sold_out", "error_message": "none left", "contended": 0})
        );
        assert_eq!(
            as_json(Outcome::requeued(1, Duration::from_millis(200), 6)),
            json!({"id": 1, "status": "queued", "retry_in_ms": 200, "contended": 6})
        );
        assert_eq!(
            as_json(Outcome::retry(1, "attempt 1 of 3: x".into(), Duration::from_secs(2), 0)),
            json!({"id": 1, "status": "queued", "error_code": "internal", "error_message": "attempt 1 of 3: x",
                   "retry_in_ms": 2000, "failed_attempt": true, "contended": 0})
        );
        assert_eq!(
            as_json(Outcome::dead(1, "attempt 3 of 3: x".into(), 1)),
            json!({"id": 1, "status": "dead", "error_code": "internal", "error_message": "attempt 3 of 3: x",
                   "failed_attempt": true, "contended": 1})
        );
    }
}
