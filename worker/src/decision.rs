//! What processing a request comes to: a decision, or an unexpected error.

use seatq_core::outcome::{BookingResult, ErrorCode};
use seatq_core::sqlstate;

/// Why processing a request (or a batch) failed unexpectedly.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Read as PostgreSQL's message and SQLSTATE, as a dead request's
    /// message shows it ([`seatq_core::error::db_text`]).
    #[error("{}", seatq_core::error::db_text(.0))]
    Db(#[from] sqlx::Error),
    /// A broken expectation (a bug), an injected fault, or a caught panic.
    #[error("{0}")]
    Internal(String),
}

impl ProcessError {
    /// Contention rather than a fault (see [`sqlstate::is_contention`]).
    pub fn is_contention(&self) -> bool {
        matches!(self, ProcessError::Db(e) if sqlstate::is_contention(e))
    }
}

/// What became of one request. The caller commits the request's savepoint
/// for `Done` and rolls it back otherwise.
#[derive(Debug)]
pub enum Decision {
    /// Seats changed as the result says.
    Done(BookingResult),
    /// A final answer with a stable error code.
    Reject(ErrorCode, String),
    /// Seats it needs are locked by in-flight transactions: try again later.
    Contended,
    /// It joined its event's waiting list (`crate::line`); the database
    /// recorded and announced what became of it (waiting, or served from the
    /// list at once), and the batch records nothing for it.
    Listed,
}
