//! Every statement the client library runs, one module per concern (those
//! it shares with workers are in [`seatq_core::sql`]). The schema lives only
//! in `migrations/`. Private to the crate: its users call [`Client`]'s
//! methods, which run these.
//!
//! All statements are static strings with bound parameters: no SQL is ever
//! built from input.
//!
//! # One signature a statement
//!
//! Each statement is written once and bound once, in the shape the worker's
//! statements have (`seatq_worker::sql`, "One signature a statement", says
//! it in full):
//!
//! - its text, a `const` in SCREAMING_CASE (`ENQUEUE_MANY`), with a doc
//!   comment saying what it does;
//! - beside it, its **params struct**, the same name in CamelCase
//!   ([`queue::EnqueueMany`]): one documented field a parameter, named for
//!   what it means, borrowing the slices the call site has (`&'a [i64]`, not
//!   a `Vec`). A statement without parameters has a unit struct
//!   ([`stats::SeatsByState`]). Where the CamelCase name is its row's
//!   ([`stats::LATENCY`], whose row is [`Latency`]) the params struct says
//!   what it is of: [`stats::LatencyOf`];
//! - the struct's one method, `query(&self)`, binds the fields in the
//!   statement's order (`$1`, `$2`, …) and returns the sqlx query, ready to
//!   run: [`Rows`] of a `#[derive(sqlx::FromRow)]` **row struct**, named for
//!   what a row is, where a row has more than one column; [`Scalars`] where
//!   it has one; [`Effect`] where nothing is read back.
//!
//! A row struct is beside its statement ([`queue::KeyConflict`],
//! [`stats::SeatsInState`]), public if the client returns it as it is
//! ([`EventSummary`], [`WorkerInfo`], re-exported at the crate's root);
//! unless the row is a type the crate already has for it, in a module below
//! this one ([`crate::availability`]'s [`ClassAvailability`] and the seat
//! maps', [`crate::venue::NewEvent`]) or in seatq-core ([`RequestRecord`]).
//!
//! ```text
//! let conflicts: Vec<KeyConflict> =
//!     IdempotencyConflicts { kinds: &kinds, payloads: &payloads, keys: &keys }.query().fetch_all(&pool).await?;
//! ```
//!
//! So the order of the parameters exists in exactly one place, and a
//! parameter added is a field the compiler makes every call site fill in:
//! [`queue::ENQUEUE_MANY`] is bound by [`Client::enqueue_many`],
//! [`Client::enqueue_all`] and [`Client::enqueue_raw`] through the one
//! [`queue::EnqueueMany`]. The exceptions: [`availability::BEGIN_ONE_SNAPSHOT`]
//! is how a transaction begins, not a statement bound; and
//! [`queue::CURRENT_XACT_ID`] and [`queue::XACT_STATUS`], which
//! [`Client::enqueue_all`] runs around its COMMIT, are bound where they run.
//!
//! [`Client`]: crate::Client
//! [`Client::enqueue_many`]: crate::Client::enqueue_many
//! [`Client::enqueue_all`]: crate::Client::enqueue_all
//! [`Client::enqueue_raw`]: crate::Client::enqueue_raw
//! [`Latency`]: stats::Latency
//! [`EventSummary`]: inventory::EventSummary
//! [`WorkerInfo`]: operations::WorkerInfo
//! [`ClassAvailability`]: crate::availability::ClassAvailability
//! [`RequestRecord`]: crate::outcome::RequestRecord

pub(crate) mod availability;
pub(crate) mod batch;
pub(crate) mod inventory;
pub(crate) mod operations;
pub(crate) mod queue;
pub(crate) mod stats;

pub(crate) use seatq_core::sql::{Effect, Rows, Scalars};
