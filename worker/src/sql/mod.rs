//! Every statement the worker runs, one module per concern (those it shares
//! with producers are in [`seatq_core::sql`]). The schema lives only in
//! `migrations/`.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.

pub mod allocation;
pub mod bookings;
pub mod claim;
pub mod expiry;
pub mod fault;
pub mod metrics;
pub mod registry;
pub mod rescue;
