//! Fault injection for tests: with `SEATQ_FAULT_INJECTION=1` in the worker's
//! environment, a hold or book whose customer is `fault:panic` panics while
//! being processed, one whose customer is `fault:error` fails with an
//! unexpected error, one whose customer is `fault:hang` hangs for an hour
//! inside its batch transaction (for killing a worker mid-batch), and one
//! whose customer is `fault:slow` pauses for [`SLOW`] inside its batch
//! transaction and then is processed normally (for signalling a worker
//! mid-batch), and one whose customer is `fault:terminate` ends its own
//! database session, failing its whole batch (as a request that breaks its
//! connection would). Without the variable, such customers are ordinary names.

use std::sync::OnceLock;
use std::time::Duration;

use seatq_core::request::Request;

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Panic,
    Error,
    Hang,
    /// Pause for [`SLOW`], then carry on.
    Slow,
    /// End the batch's database session.
    Terminate,
}

/// How long a `fault:slow` request pauses inside its batch.
pub const SLOW: Duration = Duration::from_secs(2);

fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("SEATQ_FAULT_INJECTION").is_some_and(|v| v == "1"))
}

/// The fault this request asks for, if fault injection is on.
pub fn injected(request: &Request) -> Option<Fault> {
    let (Request::Hold(r) | Request::Book(r)) = request else {
        return None;
    };
    if !enabled() {
        return None;
    }
    match r.customer.as_str() {
        "fault:panic" => Some(Fault::Panic),
        "fault:error" => Some(Fault::Error),
        "fault:hang" => Some(Fault::Hang),
        "fault:slow" => Some(Fault::Slow),
        "fault:terminate" => Some(Fault::Terminate),
        _ => None,
    }
}
