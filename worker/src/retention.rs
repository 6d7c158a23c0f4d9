//! Retention: delete finished requests older than the retention age, in small
//! batches (short transactions, SKIP LOCKED), so the queue table stays small
//! and the claim stays an index seek.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Prune every `interval` until cancelled.
pub async fn run(
    pool: PgPool,
    older_than: Duration,
    interval: Duration,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    loop {
        match seatq::Client::from_pool(pool.clone()).prune(older_than).await {
            Ok(0) => {}
            Ok(n) => {
                Metrics::add(&metrics.pruned, n);
                tracing::info!(requests = n, "pruned finished requests");
            }
            Err(e) => tracing::warn!(error = %e, "pruning failed; will try again"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
