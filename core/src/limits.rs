//! The limits a request must keep to, shared by the request types and
//! their validation (and equal to the database's own checks).

/// Largest party one request may ask for, and most seats it may name.
pub const MAX_PARTY: u32 = 9;
/// Hold time when a request names none: ten minutes.
pub const DEFAULT_HOLD_SECONDS: u32 = 600;
/// Longest hold a request may ask for: one day.
pub const MAX_HOLD_SECONDS: u32 = 86_400;
/// Longest a hold or book may wait for seats (`wait_seconds`): a week.
pub const MAX_WAIT_SECONDS: u32 = 604_800;
/// Largest payload accepted, in bytes of JSON text.
pub const MAX_PAYLOAD_BYTES: usize = 8192;
/// Longest customer name, in characters.
pub const MAX_CUSTOMER_CHARS: usize = 200;
/// Longest batch name and longest `ref` of a batch's line, in characters
/// (`seatq.requests.batch` and `batch_ref`); both go into the line's
/// idempotency key, which must fit in a btree index entry.
pub const MAX_BATCH_NAME_CHARS: usize = 200;
pub const MAX_REF_CHARS: usize = 200;
/// Longest retention of finished requests, in hours (`--retention-hours`,
/// `seatq prune --older-than-hours`): an age in seconds must not overflow,
/// or a huge value would wrap to a tiny age and prune recent requests.
pub const MAX_RETENTION_HOURS: u64 = 1_000_000;
/// Longest idempotency key, in characters: a key is an index entry, and
/// PostgreSQL refuses an index entry of more than about 2.7 kB with an
/// error that names no field.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// Furthest ahead a request may be scheduled (`run_at`), in days. A time
/// further off (or PostgreSQL's `infinity`) would keep a request queued for
/// ever, and is far more likely a mistake than a plan.
pub const MAX_RUN_AT_DAYS: i64 = 365;
/// Most characters of an offending input (a kind, a field name, a number, a
/// string) a message quotes; a longer one is cut, with its length said, so
/// that no answer echoes an input whole.
pub const MAX_QUOTED_CHARS: usize = 64;
/// Longest event name and venue name, in characters.
pub const MAX_EVENT_NAME_CHARS: usize = 200;
/// Longest section name of a venue file, in characters.
pub const MAX_SECTION_CHARS: usize = 100;
/// Longest row label and seat label of a venue file, in characters: a label
/// is drawn on a seat map and printed on a ticket, so a long one is a
/// mistake (a column shifted, a note in the wrong cell), not a name.
pub const MAX_LABEL_CHARS: usize = 40;
