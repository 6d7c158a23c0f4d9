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
    while !shutdown.is_cancelled() {
        let mut total = 0;
        let result = loop {
            let batch = tokio::select! {
                _ = shutdown.cancelled() => break Ok(()),
                deleted = sqlx::query(retention::PRUNE_FINISHED)
                    .bind(older_than.as_secs_f64())
                    .bind(PRUNE_BATCH)
                    .execute(&pool) => deleted.map(|d| d.rows_affected()),
            };
            match batch {
                Ok(n) => {
                    Metrics::add(&metrics.pruned, n);
                    total += n;
                    if n < PRUNE_BATCH as u64 || shutdown.is_cancelled() {
                        break Ok(());
                    }
                }
                Err(e) => break Err(e),
            }
        };
        if total > 0 {
            tracing::info!(requests = total, "pruned finished requests");
        }
        if let Err(e) = result {
            tracing::warn!(error = %e, retry_in = ?interval, "pruning failed; will try again");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
