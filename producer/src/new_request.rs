//! One request to enqueue, with its queue options ([`NewRequest`]) and its
//! place in a batch ([`InBatch`]), and the checks of a batch's name and a
//! line's ref. Imports nothing of this crate's.

use chrono::{DateTime, Utc};

use seatq_core::limits::{MAX_BATCH_NAME_CHARS, MAX_REF_CHARS};
use seatq_core::outcome::ErrorCode;
use seatq_core::request::Request;
use seatq_core::{RequestError, validate};

/// One request to enqueue, with its queue options.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub request: Request,
    /// A second enqueue with the same key, kind and payload returns the
    /// first request's id; with another kind or payload it is refused
    /// ([`ErrorCode::IdempotencyConflict`]).
    pub idempotency_key: Option<String>,
    /// Higher runs first (default 0).
    pub priority: i16,
    /// Not to be processed before this time (default: at once).
    pub run_at: Option<DateTime<Utc>>,
    /// The batch it belongs to, with its line and ref (default: none); a
    /// [`Batch`](crate::Batch) sets it on each of its parties.
    pub batch: Option<InBatch>,
}

impl NewRequest {
    /// Validate the request and its queue options, as the database does
    /// (the key, the request, then `run_at`: [`validate::check_new`]), and
    /// the batch's name and ref.
    pub fn check(&self) -> Result<(), RequestError> {
        let payload = self.request.payload();
        validate::check_new(self.request.kind(), &payload, self.idempotency_key.as_deref(), self.run_at)?;
        self.batch.as_ref().map_or(Ok(()), InBatch::check)
    }
}

impl From<Request> for NewRequest {
    fn from(request: Request) -> Self {
        NewRequest { request, idempotency_key: None, priority: 0, run_at: None, batch: None }
    }
}

/// Where a request stands in its batch: its name, its line (from 1) and its
/// ref, if any (see [`NewRequest::batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InBatch {
    pub name: String,
    /// The submitter's own reference for the party (`ref` in files).
    pub reference: Option<String>,
    /// The line of the file (or the place in the batch), from 1.
    pub line: usize,
}

impl InBatch {
    /// Check the name and the ref.
    pub fn check(&self) -> Result<(), RequestError> {
        check_name(&self.name)?;
        self.reference.as_deref().map_or(Ok(()), check_ref)
    }

    /// The line as stored (`batch_line`); none past what an `int` holds.
    pub(crate) fn line_number(&self) -> Option<i32> {
        i32::try_from(self.line).ok().filter(|l| *l > 0)
    }
}

/// Check a batch name: 1 to [`MAX_BATCH_NAME_CHARS`] characters, not all
/// blank, without control characters.
pub fn check_name(name: &str) -> Result<(), RequestError> {
    check_text("batch", name, MAX_BATCH_NAME_CHARS)
}

/// Check a line's `ref`: 1 to [`MAX_REF_CHARS`] characters, not all blank,
/// without control characters.
pub fn check_ref(reference: &str) -> Result<(), RequestError> {
    check_text("ref", reference, MAX_REF_CHARS)
}

fn check_text(field: &str, text: &str, most: usize) -> Result<(), RequestError> {
    let invalid =
        |why: String| Err(RequestError { code: ErrorCode::InvalidRequest, message: format!("{field}: {why}") });
    if text.trim().is_empty() {
        return invalid("must not be empty".into());
    }
    let chars = text.chars().count();
    if chars > most {
        return invalid(format!("{chars} characters, at most {most} allowed"));
    }
    if text.chars().any(char::is_control) {
        return invalid("must not contain control characters (tabs, line breaks, U+0000)".into());
    }
    Ok(())
}
