//! seatq-worker: claims booking requests from `seatq.requests` and allocates
//! seats.
//!
//! # Layout
//!
//! - [`worker`]: the process: batch loops, LISTEN wake-ups with a fallback
//!   poll, the sweeper, graceful shutdown;
//! - [`batch`]: one claim-process-record transaction;
//! - [`allocate`]: one request's seat changes (all-or-nothing, never waiting
//!   on a row lock);
//! - [`sweeper`]: active expiry of lapsed holds;
//! - [`registry`]: registration and heartbeats in `seatq.workers`;
//! - [`retention`]: pruning of old finished requests;
//! - [`metrics`]: Prometheus `/metrics` and `/healthz`;
//! - [`retry`]: jittered exponential backoff;
//! - [`fault`]: fault injection for tests (off unless `SEATQ_FAULT_INJECTION=1`).
//!
//! SQL lives in the shared `seatq` crate ([`seatq::sql`]).

pub mod allocate;
pub mod batch;
pub mod fault;
pub mod metrics;
pub mod registry;
pub mod retention;
pub mod retry;
pub mod sweeper;
pub mod worker;

use std::time::Duration;

pub use worker::Worker;

/// Worker settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Batch loops in this process; each uses one connection at a time.
    pub concurrency: usize,
    /// Requests claimed per transaction (one commit carries them all), at
    /// most [`MAX_BATCH_SIZE`].
    pub batch_size: i64,
    /// How often an idle loop polls when no NOTIFY arrives.
    pub poll_interval: Duration,
    /// How often lapsed holds are swept; zero turns the sweeper off.
    pub sweep_interval: Duration,
    /// Retries of a contended request, after jittered backoffs, before it
    /// goes back to the queue (at least 1).
    pub contention_retries: u32,
    /// How long a still-contended request waits in the queue.
    pub requeue_delay: Duration,
    /// Name in `seatq.workers` (default `host-pid`).
    pub name: Option<String>,
    /// How often the worker heartbeats in `seatq.workers`.
    pub heartbeat_interval: Duration,
    /// Finished requests older than this are pruned; `None` keeps them.
    pub retention: Option<Duration>,
    /// How often retention runs.
    pub prune_interval: Duration,
    /// Longest a batch may take before the worker gives up on its connection
    /// (a silent network); its transaction then rolls back on the server.
    pub batch_timeout: Duration,
}

/// Largest batch. Each request runs under a savepoint, and a request may use
/// two subtransaction ids; past 64 per transaction PostgreSQL's
/// subtransaction cache overflows and every snapshot on the server slows down.
pub const MAX_BATCH_SIZE: i64 = 32;

impl Default for Config {
    fn default() -> Self {
        Config {
            concurrency: 2,
            batch_size: MAX_BATCH_SIZE,
            poll_interval: Duration::from_millis(500),
            sweep_interval: Duration::from_secs(1),
            contention_retries: 5,
            requeue_delay: Duration::from_millis(200),
            name: None,
            heartbeat_interval: Duration::from_secs(1),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
            prune_interval: Duration::from_secs(60),
            batch_timeout: Duration::from_secs(60),
        }
    }
}
