//! The shape of a worker's background tasks (the sweeper, retention, the
//! registry's heartbeat): a round every interval until shutdown, a failed
//! round logged and tried again after the interval or a backoff, and a
//! recovery said once.

use std::future::Future;
use std::time::Duration;

use seatq_core::retry::Jitter;
use tokio_util::sync::CancellationToken;

/// What one round came to.
#[derive(Debug)]
pub enum Round {
    /// It did its work (or stopped between two steps at shutdown).
    Done,
    /// It failed (every task's work is the database's); the next round
    /// comes after the interval or the backoff.
    Failed(sqlx::Error),
    /// Shutdown cut it short: the task ends with nothing more logged.
    Stopped,
}

/// A background task: one round of its work. A round races `shutdown`
/// wherever it waits on the database (`shutdown.run_until_cancelled`), so
/// that an outage never holds up shutdown (a transaction abandoned mid-way
/// rolls back on the server).
pub trait Task {
    fn round(&mut self, shutdown: &CancellationToken) -> impl Future<Output = Round> + Send;
}

/// What a task logs about its failures.
#[derive(Debug, Clone, Copy)]
pub struct Messages {
    /// A failed round, at `warn`, with the error and the time to the next.
    pub failed: &'static str,
    /// Set: a failure following a failure is logged at `debug` with this,
    /// so a long outage is said once, not every interval. Unset: each is a
    /// `warn`.
    pub failed_again: Option<&'static str>,
    /// A round that succeeds after failures, at `info`.
    pub recovered: Option<&'static str>,
}

/// How often a task runs and how it waits after a failure.
#[derive(Debug)]
pub struct Periodic {
    /// Between rounds.
    pub interval: Duration,
    /// After a failed round, wait the next of these delays rather than the
    /// interval (from the first again after a round that succeeds).
    pub backoff: Option<Jitter>,
    pub messages: Messages,
}

impl Periodic {
    /// Run `task` every interval until `shutdown` is cancelled.
    pub async fn run<T: Task>(mut self, task: &mut T, shutdown: &CancellationToken) {
        let mut failing = false;
        while !shutdown.is_cancelled() {
            let delay = match task.round(shutdown).await {
                Round::Stopped => return,
                Round::Done => {
                    if failing {
                        if let Some(message) = self.messages.recovered {
                            tracing::info!("{message}");
                        }
                        failing = false;
                    }
                    if let Some(backoff) = &mut self.backoff {
                        backoff.reset();
                    }
                    self.interval
                }
                Round::Failed(e) => {
                    let delay = self.backoff.as_mut().map_or(self.interval, Jitter::next_delay);
                    match self.messages.failed_again {
                        Some(again) if failing => tracing::debug!(error = %e, "{again}"),
                        _ => tracing::warn!(error = %e, retry_in = ?delay, "{}", self.messages.failed),
                    }
                    failing = true;
                    delay
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}
