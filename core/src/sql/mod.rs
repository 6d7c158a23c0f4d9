//! The statements both producers and workers run, and the NOTIFY channels they
//! pass each other their news on, one module per concern.
//!
//! Each crate keeps the rest of its SQL beside it: the client's in
//! `seatq::sql`, the worker's in `seatq_worker::sql`. The schema itself
//! lives only in `migrations/`.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.

pub mod notify;
pub mod retention;
pub mod schema;
pub mod stats;
