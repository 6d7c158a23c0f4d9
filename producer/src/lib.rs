//! seatq: a seat-booking queue that lives in PostgreSQL.
//!
//! Producers enqueue booking requests (`hold`, `book`, `confirm`, `cancel`)
//! into `seatq.requests`; `seatq-worker` processes claim them with
//! `FOR UPDATE SKIP LOCKED`, allocate seats all-or-nothing and write the
//! outcome back onto the request, in one short transaction.
//!
//! This crate is shared by producers and workers:
//!
//! - [`request`]: the request types and their validation;
//! - [`validate`]: the checks that give a malformed request its error code;
//! - [`outcome`]: results, error codes and request status;
//! - [`sql`]: every SQL statement, by concern;
//! - [`db`]: connecting, with zero-configuration start and migrations;
//! - [`client`]: enqueue, wait for outcomes, stats, invariant checks.
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

pub mod bulk;
pub mod client;
pub mod db;
mod error;
pub mod outcome;
pub mod request;
pub mod sql;
pub mod validate;

pub use client::{Client, Latency, NewRequest, Stats, Violation, WorkerInfo};
pub use error::Error;
pub use outcome::{BookingResult, ErrorCode, RequestRecord, SeatInfo, Status};
pub use request::{BookingRef, Request, RequestError, SeatRequest};

/// A worker whose last heartbeat is older than this is dead: `seatq workers`
/// leaves it out and live workers delete its row.
pub const WORKER_DEAD_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// Log through `tracing` to stderr, filtered by `RUST_LOG` (else by
/// `default`, e.g. `"info"`), as text or JSON lines.
pub fn init_tracing(json: bool, default: &str) {
    use tracing_subscriber::EnvFilter;
    // sqlx logs every statement at info; keep it to warnings (slow statements) or quieter.
    let sqlx = if matches!(default, "error" | "off") { default } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("{default},sqlx={sqlx}")));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
