//! seatq-core: what every part of seatq shares.
//!
//! seatq is a seat-booking queue that lives in PostgreSQL: producers enqueue
//! booking requests into `seatq.requests`, workers claim them with
//! `FOR UPDATE SKIP LOCKED`, allocate seats all-or-nothing and write the
//! outcome back onto the request. Producers use the `seatq` crate (which
//! re-exports everything here), workers `seatq-worker`; both build on this
//! one:
//!
//! - [`request`]: the request types, the one definition of each;
//! - [`customer`]: the normal form in which customer names are compared;
//! - [`limits`]: the limits a request must keep to;
//! - [`validate`]: the checks that give a malformed request its error code
//!   (the same checks the database runs on every insert);
//! - [`outcome`]: results, error codes, request statuses and booking states;
//! - [`error`]: the error types of the libraries (and a refused request's);
//! - [`db`]: connecting, with zero-configuration start and migrations, and
//!   creating and dropping databases;
//! - [`reach`]: how seatq reaches its database (directly, or through a
//!   transaction pooler), and the pool handle every statement runs on;
//! - [`retry`]: jittered exponential backoff;
//! - [`token`]: hold tokens, what proves a hold is the caller's;
//! - [`sqlstate`]: what a database error's SQLSTATE means to seatq;
//! - [`sql`]: the statements producers and workers both run;
//! - `bin` (feature `bin`): what seatq's own binaries share;
//! - `http` (feature `http`): serving HTTP with a header timeout, for
//!   `seatq serve` and the worker's metrics.

#[cfg(feature = "bin")]
pub mod bin;
pub mod citus;
pub mod customer;
pub mod db;
pub mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod limits;
pub mod outcome;
pub mod reach;
pub mod request;
pub mod retry;
pub mod sql;
pub mod sqlstate;
pub mod token;
pub mod validate;

pub use error::{Error, RequestError};
pub use outcome::{
    BookingResult, BookingState, ErrorCode, Place, PlaceList, RequestRecord, SeatAvailability, SeatInfo, SeatState,
    Status, WaitlistOrder,
};
pub use request::{BookingRef, HoldExtension, Request, SeatRequest};
pub use token::{HoldToken, TokenHash};

/// A worker whose last heartbeat is older than this is dead: `seatq workers`
/// leaves it out and live workers delete its row.
pub const WORKER_DEAD_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
