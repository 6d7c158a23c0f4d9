//! seatq-worker: claims booking requests from `seatq.requests` and allocates
//! seats.
//!
//! # The seat path, in the order a batch runs it
//!
//! A file a step, named after what it does. Every step runs inside the one
//! short transaction of [`batch`], which commits once at the end:
//!
//! 1. [`batch`]: **claim** up to a batch of due requests (`FOR UPDATE SKIP
//!    LOCKED`: the row locks are the claim), check each again, and run the
//!    steps below;
//! 2. `manage`: **confirm, cancel, extend** a booking, one request at a time
//!    under its own savepoint, first, so that the holds and bookings find
//!    the seats a cancel gave back;
//! 3. `allocate`: **allocate** seats to every hold and book of the batch at
//!    once, set-based: read and lock the seats they may take in a few
//!    statements, never waiting on a row lock;
//! 4. `choose`: **choose**, in memory and in claim order, what each request
//!    gets (cheapest first, named seats, side by side; all or nothing per
//!    party), or why not; no statement of its own, so it is unit-tested;
//! 5. `take`: **take** the seats granted, making them bookings, in one
//!    statement;
//! 6. `record`: **record** every request's outcome, in one statement; then
//!    [`batch`] commits, and announces the finished requests.
//!
//! `decision` is what a step comes to for one request (`Decision`), or the
//! unexpected error that stops it (`ProcessError`).
//!
//! # Around the batch
//!
//! - [`worker`]: the process: batch loops, LISTEN wake-ups with a fallback
//!   poll, the sweeper, graceful shutdown;
//! - `wake`: which loop claims next, and when a claim would find nothing;
//! - `periodic`: the shape of the background tasks below;
//! - [`sweeper`]: active expiry of lapsed holds;
//! - `registry`: registration and heartbeats in `seatq.workers`;
//! - `rescue`: a dead worker's requests taken over at once (life locks);
//! - `retention`: pruning of old finished requests;
//! - [`metrics`]: Prometheus `/metrics` and `/healthz`;
//! - `warm`: a worker's connections warmed before its first batch;
//! - `fault`: fault injection for tests (off unless `SEATQ_FAULT_INJECTION=1`);
//! - [`sql`]: every statement the worker runs (those it shares with
//!   producers are in [`seatq_core::sql`]).
//!
//! The public modules are what a test or a benchmark drives directly; the
//! rest is the worker's own.

mod agenda;
mod allocate;
pub mod batch;
mod choose;
mod decision;
mod fault;
mod line;
mod manage;
pub mod metrics;
mod periodic;
mod record;
mod registry;
mod rescue;
mod retention;
pub mod sql;
pub mod sweeper;
mod take;
mod wake;
mod warm;
pub mod worker;

use std::time::Duration;

pub use worker::Worker;

/// How a worker takes the cheapest seats (named seats and `together` work
/// the same way under every strategy). The default is the one to use; the
/// others exist so the benchmark can compare them side by side. As a command
/// line value (`--strategy`), each is named in kebab case: `skip-locked`,
/// `blocking`, `nowait`, `serializable`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr, strum::Display)]
#[strum(serialize_all = "kebab-case")]
pub enum Strategy {
    /// Lock what you can (`FOR UPDATE SKIP LOCKED`); if others hold seats the
    /// party needs, give back and retry with jittered backoff.
    #[default]
    SkipLocked,
    /// Plain `FOR UPDATE`: wait for locked seats.
    Blocking,
    /// `FOR UPDATE NOWAIT`: fail at the first locked seat, retry with backoff.
    Nowait,
    /// No row locks; `SERIALIZABLE` transactions, retried on serialization failure.
    Serializable,
}

impl Strategy {
    /// Whether taking seats fails with an error when others hold them
    /// (`nowait`, `serializable`), rather than skipping or waiting.
    pub fn fails_on_contention(self) -> bool {
        matches!(self, Strategy::Nowait | Strategy::Serializable)
    }

    /// The strategy's name on the command line.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        <Strategy as clap::ValueEnum>::from_str(s, false).map_err(|_| {
            let names: Vec<&str> = <Strategy as clap::ValueEnum>::value_variants().iter().map(|v| v.as_str()).collect();
            format!("unknown strategy {s:?}: expected one of {}", names.join(", "))
        })
    }
}

/// Worker settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Batch loops in this process; each uses one connection at a time.
    pub concurrency: usize,
    /// Of those loops, how many may be in a transaction at once (at least 1):
    /// on a database with few cores, more concurrent batches only add
    /// contention (see docs/design.md).
    pub max_active: usize,
    /// Requests claimed per transaction (one commit carries them all), at
    /// most [`MAX_BATCH_SIZE`].
    pub batch_size: i64,
    /// Requests claimed per transaction while a backlog lasts: a claim that
    /// comes back full doubles the next one, up to this (at least
    /// `batch_size`, at most [`MAX_BATCH_SIZE`]); one that comes back short,
    /// or whose requests found seats held by other batches, starts again
    /// from `batch_size`.
    pub backlog_batch_size: i64,
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
    /// How seats are taken.
    pub strategy: Strategy,
    /// Longest a batch may take before the worker gives up on its connection
    /// (a silent network); its transaction then rolls back on the server.
    pub batch_timeout: Duration,
    /// Record outcomes only with synchronous commit to a standby: every
    /// session sets `synchronous_commit = on`, and a connection to a server
    /// whose `synchronous_standby_names` is empty is refused (so the worker
    /// does not start there), since an outcome told from a commit no standby
    /// has is lost with the primary.
    pub synchronous_standby: bool,
}

/// Requests per batch unless configured: large enough that one commit
/// carries many bookings, small enough to keep latency low (docs/benchmarks.md
/// shows how to measure the trade-off).
pub const DEFAULT_BATCH_SIZE: i64 = 100;
/// Requests per batch while a backlog lasts, unless configured: fewer
/// commits and statements per request where latency is already that of the
/// queue ahead (docs/benchmarks.md measures the trade-off).
pub const DEFAULT_BACKLOG_BATCH_SIZE: i64 = 400;
/// Batch transactions a worker process runs at once unless configured:
/// about two per core of a small database server; beyond that, concurrent
/// batches mostly step over each other's locks (docs/design.md).
pub const DEFAULT_MAX_ACTIVE: usize = 4;
/// Most batch loops, or turns, a process takes.
pub const MAX_LOOPS: usize = 1024;

/// Parses a count of batch loops or turns: 1 to [`MAX_LOOPS`], with a clear
/// error otherwise (for `seatq-worker` and the benchmark alike).
pub fn loops() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_LOOPS as u64)
}
/// Largest batch allowed.
pub const MAX_BATCH_SIZE: i64 = 1000;

impl Default for Config {
    fn default() -> Self {
        Config {
            concurrency: 2,
            max_active: DEFAULT_MAX_ACTIVE,
            batch_size: DEFAULT_BATCH_SIZE,
            backlog_batch_size: DEFAULT_BACKLOG_BATCH_SIZE,
            poll_interval: Duration::from_millis(500),
            sweep_interval: Duration::from_secs(1),
            contention_retries: 5,
            requeue_delay: Duration::from_millis(200),
            name: None,
            heartbeat_interval: Duration::from_secs(1),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
            prune_interval: Duration::from_secs(60),
            batch_timeout: Duration::from_secs(60),
            strategy: Strategy::SkipLocked,
            synchronous_standby: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::Strategy;

    #[test]
    fn a_strategy_is_named_alike_everywhere() {
        for s in Strategy::value_variants() {
            let value = s.to_possible_value().expect("not hidden");
            assert_eq!(value.get_name(), s.as_str());
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(*s));
        }
        let err = "fast".parse::<Strategy>().unwrap_err();
        assert!(err.contains("skip-locked, blocking, nowait, serializable"), "{err}");
    }
}
