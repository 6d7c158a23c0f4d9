//! Every statement the client library runs, one module per concern (those
//! it shares with workers are in [`seatq_core::sql`]). The schema lives only
//! in `migrations/`.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.

pub mod availability;
pub mod batch;
pub mod inventory;
pub mod operations;
pub mod queue;
pub mod stats;
