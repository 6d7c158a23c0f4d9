//! Fault injection for tests (the worker's `fault` module, off unless
//! `SEATQ_FAULT_INJECTION=1`).

/// End this session's own backend, as a broken connection would: its
/// transaction rolls back and the client sees the connection go.
pub const TERMINATE_OWN_BACKEND: &str = "SELECT pg_terminate_backend(pg_backend_pid())";
