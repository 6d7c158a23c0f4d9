//! Every SQL statement seatq runs, named after what it does, one module per
//! concern. The schema itself lives only in `migrations/`.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.

pub mod allocation;
pub mod bench;
pub mod bookings;
pub mod expiry;
pub mod fault;
pub mod inventory;
pub mod operations;
pub mod queue;
pub mod schema;
pub mod stats;
