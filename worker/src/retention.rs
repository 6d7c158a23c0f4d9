//! Retention: delete succeeded and failed requests older than the retention
//! age, in small batches (short transactions, SKIP LOCKED), so the queue table
//! stays small and the claim stays an index seek. Dead requests are kept for
//! an operator to retry.

use std::sync::Arc;
use std::time::Duration;

use seatq_core::sql::retention;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::periodic::{Messages, Periodic, Round, Task};

/// Requests deleted per transaction.
const PRUNE_BATCH: i64 = 1000;

/// Prune every `interval` until cancelled. Cancellation is checked between
/// batches, and a batch waiting on the database (an outage) is abandoned (it
/// rolls back; the next round does its work).
pub async fn run(
    pool: PgPool,
    older_than: Duration,
    interval: Duration,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let periodic = Periodic {
        interval,
        backoff: None,
        messages: Messages { failed: "pruning failed; will try again", failed_again: None, recovered: None },
    };
    periodic.run(&mut Pruner { pool, older_than, metrics }, &shutdown).await;
}

/// Retention: a round prunes until nothing old is left.
struct Pruner {
    pool: PgPool,
    older_than: Duration,
    metrics: Arc<Metrics>,
}

impl Task for Pruner {
    async fn round(&mut self, shutdown: &CancellationToken) -> Round {
        let mut total = 0;
        let result = loop {
            let deleted =
                retention::PruneFinished { older_than_secs: self.older_than.as_secs_f64(), limit: PRUNE_BATCH }
                    .query()
                    .fetch_one(&self.pool);
            let Some(batch) = shutdown.run_until_cancelled(deleted).await else { break Round::Done };
            match batch.map(|n| u64::try_from(n).unwrap_or(0)) {
                Ok(n) => {
                    Metrics::add(&self.metrics.pruned, n);
                    total += n;
                    if n < PRUNE_BATCH as u64 || shutdown.is_cancelled() {
                        break Round::Done;
                    }
                }
                Err(e) => break Round::Failed(e),
            }
        };
        if total > 0 {
            tracing::info!(requests = total, "pruned finished requests");
        }
        result
    }
}
