//! The NOTIFY channels producers and workers share (a notification is only
//! a hint: whoever is woken reads the rows).

/// The NOTIFY channel a finished request's id is sent on.
pub const DONE_CHANNEL: &str = "seatq_done";
/// The NOTIFY channel that tells workers new requests are waiting.
pub const NEW_CHANNEL: &str = "seatq_new";
/// The NOTIFY channel the sweeper announces a lapsed hold on, as it marks
/// the booking `expired`: the payload is the booking id alone (any login may
/// LISTEN, so no customer name travels), sent in the sweep's own transaction
/// and so delivered only once that commits.
pub const HOLD_LAPSED_CHANNEL: &str = "seatq_hold_lapsed";
/// The NOTIFY channel a worker process announces itself on once it holds
/// its life lock and again once it is registered, so that the others read
/// the ring of workers again and watch it from its first moment
/// (`worker/src/rescue.rs`). No payload: whoever is woken reads the table.
pub const WORKERS_CHANNEL: &str = "seatq_workers";
