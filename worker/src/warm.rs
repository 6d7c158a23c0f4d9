//! Warming a worker's connections before its first batch.
//!
//! A new session's first batch pays for loading the catalog entries of every
//! table and index a batch touches, compiling `seatq.lock_cheapest_spread`
//! and planning every statement; on a hot event the first batches of a
//! freshly started worker took 17 to 42 ms instead of 5 to 15, and the queue
//! they left behind took a hundred milliseconds to clear. So a worker runs
//! each of a batch's statements once on every connection at start, with
//! nothing to claim, lock or record, and rolls back.

use seatq::sql::{allocation, queue};
use serde_json::json;
use sqlx::postgres::PgConnection;
use sqlx::{Acquire, PgPool};

use crate::{Strategy, allocate, cheapest};

/// Warm up to `connections` of the pool's connections: all held at once, so
/// that each is a different one, and warmed one after another, so that the
/// warm-up is never more than one transaction on the server (it takes the
/// queue's claim lock, as a batch does). Best effort: a failure is logged,
/// and the batches find a cold connection as they would have.
pub async fn connections(pool: &PgPool, connections: u32, strategy: Strategy) {
    let mut held = Vec::new();
    for _ in 0..connections {
        match pool.acquire().await {
            Ok(conn) => held.push(conn),
            Err(e) => {
                tracing::debug!(error = %e, "cannot warm a connection");
                break;
            }
        }
    }
    for conn in &mut held {
        if let Err(e) = one(conn, strategy).await {
            tracing::debug!(error = %e, "warming a connection failed");
        }
    }
}

/// Run a batch's statements once, with empty inputs, and roll back.
async fn one(conn: &mut PgConnection, strategy: Strategy) -> Result<(), allocate::ProcessError> {
    let mut tx = conn.begin().await?;
    sqlx::query(queue::CLAIM_BATCH).bind(0_i64).execute(&mut *tx).await?;
    cheapest::allocate(&mut tx, &[], strategy).await?;
    allocate::take_seats(&mut tx, &[]).await?;
    sqlx::query(queue::RECORD_OUTCOMES).bind(json!([])).execute(&mut *tx).await?;
    sqlx::query(allocation::WARM_SPREAD).execute(&mut *tx).await?;
    tx.rollback().await?;
    Ok(())
}
