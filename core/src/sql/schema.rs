//! The schema's version.

/// Versions of the migrations applied (readable by every seatq role).
pub const APPLIED_MIGRATIONS: &str = "SELECT version FROM public._sqlx_migrations WHERE success";
