//! The NOTIFY channels producers and workers share (a notification is only
//! a hint: whoever is woken reads the rows).

/// The NOTIFY channel a finished request's id is sent on.
pub const DONE_CHANNEL: &str = "seatq_done";
/// The NOTIFY channel that tells workers new requests are waiting.
pub const NEW_CHANNEL: &str = "seatq_new";
