//! seatq: a seat-booking queue that lives in PostgreSQL.
//!
//! Producers enqueue booking requests (`hold`, `book`, `confirm`, `cancel`, `extend`)
//! into `seatq.requests`; `seatq-worker` processes claim them with
//! `FOR UPDATE SKIP LOCKED`, allocate seats all-or-nothing and write the
//! outcome back onto the request, in one short transaction.
//!
//! This crate is the producer's library: a [`Client`] enqueues requests (one,
//! many, whole files as a [`Batch`], or inside the caller's own transaction
//! with [`enqueue_in`]), waits for their outcomes (every waiter of a client
//! sharing one listening connection), shows a storefront what is free, keeps
//! the inventory of events and seats, and reads what an operator needs.
//!
//! ```no_run
//! # async fn demo() -> Result<(), seatq::Error> {
//! use seatq::{Client, Request, SeatRequest};
//!
//! let client = Client::connect(&seatq::db::database_url()).await?;
//! let id = client.enqueue(Request::Hold(SeatRequest::new(1, 2, 3, "ann"))).await?;
//! let outcome = client.wait(id, None).await?;
//! println!("{:?}: {:?}", outcome.status, outcome.booking());
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! The modules stand in floors, each importing only from the floors below
//! it (and `outcome_file` from `bulk`, beside it), never from above: there
//! is no import cycle, which `producer/tests/layers.rs` checks from the
//! sources, file by file and module by module.
//!
//! ```text
//!  client/        Client, one impl block a concern, each importing Client from mod.rs:
//!                 mod.rs (the handle: pool, waiter hub, view cache), enqueue, wait,
//!                 batches, storefront, inventory, operations
//!     │
//!  batch          Batch: parties under one name and their keys, Submitted, Summary
//!     │
//!  view_cache     the client's cache of availability views
//!  waiters        the waiter hub (private)
//!     │
//!  sql            the client's statements, each with its params and row structs (private;
//!                 EventSummary, SeatGroup, WorkerInfo, Latency, Violation are its rows)
//!     │
//!  bulk           request files (JSON lines, CSV) read and checked; Format, Ref
//!  venue          venue files read and checked
//!  outcome_file   PartyOutcome, PartyStatus, OutcomeWriter (on bulk's Format and Ref)
//!     │
//!  new_request    NewRequest, InBatch, check_name, check_ref     ┐ the ground floor:
//!  retry          Retry, Backoff                                 │ imports nothing
//!  keys           new_idempotency_key, batch parties' keys       │ of this crate's
//!  lines          BadLine, text lines and CSV records            │
//!  json           JSON text, a field named twice refused         │
//!  availability   what a storefront shows                        ┘
//! ```
//!
//! Below them all is `seatq-core`, re-exported: [`request`] (the request
//! types), [`validate`], [`outcome`] (results, error codes, statuses),
//! [`error`], [`limits`], [`db`] (connecting and migrating) and [`sqlstate`].
//! Its jittered backoff is not re-exported: retrying is [`Retry`].
//!
//! The root re-exports, below, what a user of the crate needs; the modules
//! keep their functions and constants (`seatq::bulk::parse`,
//! `seatq::venue::parse_csv`, `seatq::outcome_file::OUTCOME_COLUMNS`).
//! The statements (`sql`) are private: each is run by a method of
//! [`Client`], and the rows they read that a user sees are re-exported
//! here.

// Beyond the workspace's lints (Cargo.toml, [workspace.lints]), which this
// crate takes too.
#![warn(rust_2018_idioms, unreachable_pub)]

pub mod availability;
pub mod batch;
pub mod bulk;
mod client;
pub mod json;
mod keys;
mod lines;
pub mod new_request;
pub mod outcome_file;
mod retry;
pub(crate) mod sql;
pub mod venue;
pub mod view_cache;
mod waiters;

// What a user needs, in one block: this crate's, then seatq-core's.
pub use crate::{
    availability::{AvailabilityView, ClassAvailability, ClassPrices, LayoutSeat, MapSeat, SeatStates},
    batch::{Batch, BatchStatus, Submitted, Summary},
    client::{Client, enqueue::enqueue_in, inventory::EventChanges, operations::Stats},
    keys::new_idempotency_key,
    lines::BadLine,
    new_request::{InBatch, NewRequest},
    outcome_file::{OutcomeWriter, PartyOutcome, PartyStatus},
    retry::{Backoff, Retry},
    sql::{
        inventory::{EventSummary, SeatGroup, WaitingList},
        operations::WorkerInfo,
        stats::{Latency, Violation},
    },
    view_cache::ViewCacheStats,
};
pub use seatq_core::{
    BookingRef, BookingResult, BookingState, Error, ErrorCode, HoldExtension, HoldToken, Place, PlaceList, Request,
    RequestError, RequestRecord, SeatAvailability, SeatInfo, SeatRequest, SeatState, Status, TokenHash,
    WORKER_DEAD_AFTER, WaitlistOrder, customer, db, error, limits, outcome, reach, request, sqlstate, token, validate,
};
