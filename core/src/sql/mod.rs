//! The statements both producers and workers run, and the NOTIFY channels they
//! pass each other their news on, one module per concern.
//!
//! Each crate keeps the rest of its SQL beside it: the client's in
//! `seatq::sql` (private to it), the worker's in `seatq_worker::sql`. The
//! schema itself lives only in `migrations/`.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.
//!
//! A statement that takes parameters or reads rows of more than one column
//! is written and bound as `seatq_worker::sql` describes ("One signature a
//! statement"): beside its text, a params struct of the same name in
//! CamelCase whose one `query()` binds its fields in order and returns one
//! of the three query types below, with a row struct where a row has more
//! than one column ([`stats::RequestsByStatus`], [`stats::StatusCount`]).
//! The types are here so that the client's statements, the worker's and
//! these share them. (The migrations' bookkeeping, [`schema`], is read by
//! [`crate::db::migrate`] alone, which binds it itself.)

pub mod notify;
pub mod retention;
pub mod route;
pub mod schema;
pub mod stats;

use sqlx::Postgres;
use sqlx::postgres::PgArguments;

/// A statement whose rows are read as `Row`, a `FromRow` struct.
pub type Rows<'a, Row> = sqlx::query::QueryAs<'a, Postgres, Row, PgArguments>;

/// A statement whose rows are one column each, read as `T`.
pub type Scalars<'a, T> = sqlx::query::QueryScalar<'a, Postgres, T, PgArguments>;

/// A statement run for its effect: nothing it returns is read.
pub type Effect<'a> = sqlx::query::Query<'a, Postgres, PgArguments>;
