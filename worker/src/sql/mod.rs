//! Every statement the worker runs, one module per concern (those it shares
//! with producers are in [`seatq_core::sql`]). The schema lives only in
//! `migrations/`.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.
//!
//! # One signature a statement
//!
//! Each statement is written once and bound once:
//!
//! - its text, a `pub const` in SCREAMING_CASE (`LOCK_BOOKING`), with a doc
//!   comment saying what it does;
//! - beside it, its **params struct**, the same name in CamelCase
//!   ([`bookings::LockBooking`]): one documented field a parameter, named for
//!   what it means, borrowing the slices the call site has (`&'a [i64]`, not a
//!   `Vec`), so that building it copies nothing. A statement without
//!   parameters has a unit struct ([`metrics::Ping`]);
//! - the struct's one method, `query(&self)`, binds the fields in the
//!   statement's order (`$1`, `$2`, …) and returns the sqlx query, ready to
//!   run: [`Rows`] of a `#[derive(sqlx::FromRow)]` **row struct** beside it,
//!   named for what a row is ([`bookings::Booking`]; or a type that already
//!   is one, `SeatInfo`), where a row has more than one column; [`Scalars`]
//!   where it has one; [`Effect`] where nothing is read back. The query
//!   borrows what the fields borrow, not the struct, so
//!   `Statement { .. }.query()` is one expression.
//!
//! ```no_run
//! # async fn f(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
//! use seatq_worker::sql::bookings::{self, Booking};
//!
//! let booking: Option<Booking> =
//!     bookings::LockBooking { booking: 41, request: 7, route: None }.query().fetch_optional(&mut *conn).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The call sites and the warm-up (`crate::warm`, with `Default` params:
//! empty arrays) build the same struct, so the order of the parameters exists
//! in exactly one place, and a parameter added is a field the compiler makes
//! every call site fill in. The texts a strategy chooses between
//! ([`allocation::LOCK_CHEAPEST`] and its variants) share one struct, which
//! picks the text. ([`claim::BEGIN_SERIALIZABLE`] is how a transaction
//! begins, not a statement the worker binds: it has none.)
//!
//! The three query types ([`Rows`], [`Scalars`], [`Effect`]) are
//! [`seatq_core::sql`]'s, re-exported here: the statements the worker shares
//! with producers there, and the client's own (`seatq::sql`), have the same
//! shape.

pub mod allocation;
pub mod bookings;
pub mod claim;
pub mod expiry;
pub mod fault;
pub mod line;
pub mod metrics;
pub mod registry;
pub mod rescue;

// Defined in seatq-core, which the client's statements use too.
pub use seatq_core::sql::{Effect, Rows, Scalars};
