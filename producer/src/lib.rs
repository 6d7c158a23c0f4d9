//! seatq: a seat-booking queue that lives in PostgreSQL.
//!
//! Producers enqueue booking requests (`hold`, `book`, `confirm`, `cancel`, `extend`)
//! into `seatq.requests`; `seatq-worker` processes claim them with
//! `FOR UPDATE SKIP LOCKED`, allocate seats all-or-nothing and write the
//! outcome back onto the request, in one short transaction.
//!
//! This crate is the producer's library:
//!
//! - [`client`]: enqueue (also inside the caller's own transaction:
//!   [`enqueue_in`]), wait for outcomes (every waiter of a client sharing one
//!   listening connection), stats, invariant checks;
//! - [`availability`]: free seats and prices per class, and the seat map, for a storefront;
//! - [`view_cache`]: the client's shared, short-lived cache of them, for every page view;
//! - [`bulk`]: request files (JSON lines or CSV), checked line by line;
//! - [`batch`]: thousands of parties under one name, enqueued so that the
//!   file can be submitted again safely, their outcomes streamed as they
//!   finish and read back later from the database alone;
//! - [`venue`]: venue files (an event's seat map), checked line by line, to
//!   import with [`Client::import_event`];
//! - [`json`]: reading the JSON text of both, refusing a field named twice;
//! - [`sql`]: the statements the client runs.
//!
//! The shared core is re-exported from `seatq-core`: [`request`] (the
//! request types), [`validate`], [`outcome`] (results, error codes,
//! statuses), [`db`] (connecting and migrating) and [`retry`].
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

pub mod availability;
pub mod batch;
pub mod bulk;
pub mod client;
mod csv_lines;
pub mod json;
pub mod sql;
pub mod venue;
pub mod view_cache;
mod waiters;

pub use availability::{AvailabilityView, ClassAvailability, ClassPrices, LayoutSeat, MapSeat, SeatStates};
pub use batch::{Batch, PartyOutcome, Summary};
pub use client::{Client, EventChanges, EventSummary, Latency, NewRequest, SeatGroup, Stats, Violation, WorkerInfo, enqueue_in};
pub use seatq_core::{
    BookingRef, BookingResult, BookingState, Error, ErrorCode, HoldExtension, Request, RequestError, RequestRecord,
    SeatAvailability, SeatInfo, SeatRequest, SeatState, Status, WORKER_DEAD_AFTER, db, error, limits, outcome, request,
    retry, sqlstate, validate,
};
pub use view_cache::ViewCacheStats;
