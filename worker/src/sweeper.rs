//! Active expiry: free lapsed holds in the background. Availability never
//! depends on it (every allocation treats a lapsed hold as free); it keeps
//! seat and booking states tidy for people and reports.

use std::sync::Arc;
use std::time::Duration;

use seatq::sql::expiry;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Rows changed per sweep transaction, to keep each one short.
const SWEEP_BATCH: i64 = 1000;

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Held seats made available again.
    pub seats: i64,
    /// Holds marked expired.
    pub bookings: i64,
}

/// Sweep until nothing lapsed is left (each pass one short transaction).
pub async fn sweep(pool: &PgPool) -> Result<Swept, sqlx::Error> {
    let mut total = Swept::default();
    loop {
        let mut tx = pool.begin().await?;
        let seats: i64 = sqlx::query_scalar(expiry::SWEEP_SEATS).bind(SWEEP_BATCH).fetch_one(&mut *tx).await?;
        let bookings: i64 = sqlx::query_scalar(expiry::SWEEP_BOOKINGS).bind(SWEEP_BATCH).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        total.seats += seats;
        total.bookings += bookings;
        if seats < SWEEP_BATCH && bookings < SWEEP_BATCH {
            return Ok(total);
        }
    }
}

/// Sweep every `interval` until cancelled.
pub async fn run(pool: PgPool, interval: Duration, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    loop {
        match sweep(&pool).await {
            Ok(s) if s.seats + s.bookings > 0 => {
                Metrics::add(&metrics.seats_expired, s.seats as u64);
                Metrics::add(&metrics.holds_expired, s.bookings as u64);
                tracing::info!(seats = s.seats, bookings = s.bookings, "expired lapsed holds")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweep failed; will try again"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
