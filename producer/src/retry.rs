//! Retrying what fails for want of a connection: [`Retry`], a policy (how
//! long, how often), and [`Backoff`], one operation's pauses under it. The
//! pauses themselves are `seatq_core::retry`'s jittered exponential backoff.
//! Imports nothing of this crate's.

use std::time::Duration;

use seatq_core::Error;
use seatq_core::retry::Jitter;
use tokio::time::Instant;

/// Retrying connection-level failures ([`Error::is_connection_error`]) with
/// jittered exponential backoff, for a bounded time. Anything else (a
/// refused request, an SQL error) is returned at once.
///
/// Retrying is safe for an operation that is idempotent: reading, waiting,
/// enqueueing with an idempotency key (a retry returns the first request),
/// or a whole transaction that did not commit
/// ([`Client::enqueue_all`](crate::Client::enqueue_all)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Give up once an operation has kept failing for this long (counted from
    /// its first failure; an attempt that ran longer than this before failing
    /// starts the count again). Zero never retries.
    pub budget: Duration,
    /// The first pause; each next one doubles, up to `max_delay`. Each pause
    /// is jittered: half to all of its nominal length.
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Retry {
    /// Never retry.
    pub const NEVER: Retry = Retry::within(Duration::ZERO);

    /// Retry for up to `budget`, pausing 100 ms doubling to 5 s.
    pub const fn within(budget: Duration) -> Retry {
        Retry { budget, first_delay: Duration::from_millis(100), max_delay: Duration::from_secs(5) }
    }

    /// Run `op` until it succeeds, fails with an error that is not
    /// connection-level, or the budget is spent. Each retry is logged
    /// (`warn`), naming `what` failed.
    pub async fn run<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let mut backoff = self.backoff();
        loop {
            match op().await {
                Err(e) if backoff.pause(what, &e).await => continue,
                done => return done,
            }
        }
    }

    /// The pauses of one operation, for a hand-written retry loop.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            retry: *self,
            failing_since: None,
            attempt_started: Instant::now(),
            delays: Jitter::at_most(self.first_delay, self.max_delay),
            retries: 0,
        }
    }
}

/// The state of one operation's retries (see [`Retry::backoff`]).
#[derive(Debug)]
pub struct Backoff {
    retry: Retry,
    failing_since: Option<Instant>,
    attempt_started: Instant,
    /// The pauses of the current outage.
    delays: Jitter,
    retries: u32,
}

impl Backoff {
    /// After a failed attempt: if `error` is connection-level and the budget
    /// is not spent, log "`what` failed; retrying" (`warn`), sleep a jittered
    /// pause and return `true` (try again); else return `false`.
    pub async fn pause(&mut self, what: &str, error: &Error) -> bool {
        if !error.is_connection_error() {
            return false;
        }
        let brief = match error {
            // Without the set-up advice, which is for the final error.
            Error::Unreachable { target, source } => format!("cannot reach PostgreSQL at {target}: {source}"),
            e => e.to_string(),
        };
        self.sleep(&format!("{what} failed; retrying"), &brief).await
    }

    /// Like [`Backoff::pause`], for a failure known to be worth retrying;
    /// logs `message` and `why`.
    pub async fn sleep(&mut self, message: &str, why: &(dyn std::fmt::Display + Sync)) -> bool {
        let now = Instant::now();
        // An attempt that worked for longer than the whole budget before
        // failing ends the previous outage: this is a new one.
        if now - self.attempt_started > self.retry.budget {
            self.failing_since = None;
            self.delays.reset();
        }
        let since = *self.failing_since.get_or_insert(now);
        let left = self.retry.budget.saturating_sub(now - since);
        if left.is_zero() {
            return false;
        }
        let pause = self.delays.next_delay().min(left);
        self.retries += 1;
        tracing::warn!(retry = self.retries, in_ms = pause.as_millis() as u64, error = %why, "{message}");
        tokio::time::sleep(pause).await;
        self.attempt_started = Instant::now();
        true
    }
}
