//! Fault injection's statement (see `crate::fault`; off unless
//! `SEATQ_FAULT_INJECTION=1`).
//!
//! Each statement's params struct is beside it (see [`crate::sql`]).

use super::Effect;

/// End this session's own backend, as a broken connection would: its
/// transaction rolls back and the worker sees the connection go
/// ([`Fault::Terminate`]).
pub const TERMINATE_OWN_BACKEND: &str = "SELECT pg_terminate_backend(pg_backend_pid())";

/// The parameters of [`TERMINATE_OWN_BACKEND`]: none.
#[derive(Debug, Clone, Copy)]
pub struct TerminateOwnBackend;

impl TerminateOwnBackend {
    pub fn query(&self) -> Effect<'static> {
        sqlx::query(TERMINATE_OWN_BACKEND)
    }
}
