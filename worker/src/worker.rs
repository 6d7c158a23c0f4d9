//! The worker process: batch loops, the wake-up listener and the sweeper,
//! with graceful shutdown.

use std::time::Duration;

use seatq::sql::queue;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::batch::{self, Claim};
use crate::retry::Jitter;
use crate::{Config, sweeper};

/// A pool of batch loops sharing one database pool.
#[derive(Debug, Clone)]
pub struct Worker {
    pool: PgPool,
    config: Config,
}

impl Worker {
    /// Connect with worker session settings (see [`session_options`]),
    /// creating the database and applying migrations if needed.
    pub async fn connect(url: &str, config: Config) -> Result<Worker, seatq::Error> {
        let options = session_options(seatq::db::options(url)?);
        // One connection per batch loop, plus one for the background tasks
        // and one spare (the listener has its own).
        let pool = seatq::db::connect(options, config.concurrency as u32 + 2).await?;
        Ok(Worker::new(pool, config))
    }

    /// Use an existing pool (migrations must already be applied).
    pub fn new(pool: PgPool, mut config: Config) -> Worker {
        config.batch_size = config.batch_size.clamp(1, crate::MAX_BATCH_SIZE);
        Worker { pool, config }
    }

    /// The pool this worker uses.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Process requests until `shutdown` is cancelled, then finish the batches
    /// in hand and return.
    pub async fn run(&self, shutdown: CancellationToken) {
        let (wake_tx, wake_rx) = watch::channel(0u64);
        let tracker = TaskTracker::new();
        tracker.spawn(listen(self.pool.clone(), wake_tx, shutdown.clone()));
        if !self.config.sweep_interval.is_zero() {
            tracker.spawn(sweeper::run(self.pool.clone(), self.config.sweep_interval, shutdown.clone()));
        }
        for n in 0..self.config.concurrency.max(1) {
            let worker = self.clone();
            let (wake, shutdown) = (wake_rx.clone(), shutdown.clone());
            tracker.spawn(async move { worker.batch_loop(n, wake, shutdown).await });
        }
        tracker.close();
        tracker.wait().await;
    }

    /// Process due requests until none is left; returns how many finished.
    /// For tests and one-shot tools; long-running workers use [`Worker::run`].
    pub async fn drain(&self) -> Result<usize, sqlx::Error> {
        let mut finished = 0;
        loop {
            let (claimed, done) = self.process_once().await?;
            finished += done;
            if claimed == 0 {
                return Ok(finished);
            }
        }
    }

    async fn batch_loop(&self, n: usize, mut wake: watch::Receiver<u64>, shutdown: CancellationToken) {
        let mut errors = Jitter::new(Duration::from_millis(100), Duration::from_secs(10));
        while !shutdown.is_cancelled() {
            wake.borrow_and_update();
            match self.process_once().await {
                Ok((claimed, _)) if claimed as i64 >= self.config.batch_size => continue,
                Ok(_) => errors = Jitter::new(Duration::from_millis(100), Duration::from_secs(10)),
                Err(e) => {
                    let delay = errors.next_delay();
                    tracing::warn!(loop_ = n, error = %e, retry_in = ?delay, "batch failed; its requests stay queued");
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(delay) => {}
                    }
                    continue;
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = wake.changed() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
        tracing::debug!(loop_ = n, "batch loop stopped");
    }

    /// One batch, then its contended requests again after jittered backoffs
    /// (no transaction open while sleeping); those still contended after the
    /// last try go back to the queue. Returns (claimed, finished).
    async fn process_once(&self) -> Result<(usize, usize), sqlx::Error> {
        let first = batch::run(&self.pool, Claim::Next(self.config.batch_size)).await?;
        let mut finished = first.finished;
        let mut contended = first.contended;
        let mut jitter = Jitter::contention();
        for round in 1..=self.config.contention_retries {
            if contended.is_empty() {
                break;
            }
            tokio::time::sleep(jitter.next_delay()).await;
            let requeue = (round == self.config.contention_retries).then_some(self.config.requeue_delay);
            let report = batch::run(&self.pool, Claim::Retry { ids: &contended, requeue }).await?;
            finished += report.finished;
            contended = report.contended;
        }
        Ok((first.claimed, finished))
    }
}

/// Worker session settings, sent with the connection's startup packet: a
/// lock_timeout as the safety net (the mechanism is SKIP LOCKED / NOWAIT),
/// and timeouts that end a stuck statement or an abandoned transaction.
pub fn session_options(options: PgConnectOptions) -> PgConnectOptions {
    options.application_name("seatq-worker").options([
        ("lock_timeout", "2s"),
        ("statement_timeout", "30s"),
        ("idle_in_transaction_session_timeout", "10s"),
    ])
}

/// Turn `seatq_new` notifications into wake-ups. NOTIFY is a hint: when the
/// listener loses its connection, wake everyone to poll, since notifications
/// sent meanwhile are lost.
async fn listen(pool: PgPool, wake: watch::Sender<u64>, shutdown: CancellationToken) {
    let mut backoff = Jitter::new(Duration::from_millis(100), Duration::from_secs(10));
    while !shutdown.is_cancelled() {
        let mut listener = match seatq::db::listen(&pool, queue::NEW_CHANNEL).await {
            Ok(l) => l,
            Err(e) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?delay, "cannot listen for new requests; polling meanwhile");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => continue,
                }
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                n = listener.try_recv() => match n {
                    Ok(Some(_)) => wake.send_modify(|v| *v += 1),
                    Ok(None) => {
                        tracing::warn!("listener connection lost; reconnecting");
                        wake.send_modify(|v| *v += 1);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "listener failed; reconnecting");
                        wake.send_modify(|v| *v += 1);
                        break;
                    }
                },
            }
        }
    }
}
