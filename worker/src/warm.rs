//! Warming a worker's connections before their first batch.
//!
//! A new session's first batch pays for loading the catalog entries of every
//! table and index a batch touches, compiling `seatq.lock_cheapest_spread`
//! and planning every statement; on a hot event the first batches of a
//! freshly started worker took 17 to 42 ms instead of 5 to 15, and the queue
//! they left behind took a hundred milliseconds to clear. So a worker runs
//! each of a batch's statements once on every connection, with nothing to
//! claim, lock or record, and rolls back: on those it opens at start, and on
//! every one its pool opens later (replacing one past its lifetime, or after
//! the server restarted).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;
use seatq::sql::{allocation, queue};
use serde_json::json;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::postgres::PgConnection;
use sqlx::{Acquire, PgPool};

use crate::{Strategy, allocate, cheapest};

/// Warm up to `connections` of the pool's connections: all held at once, so
/// that each is a different one, and warmed one after another, so that the
/// warm-up is never more than one transaction on the server (a batch loop
/// waiting for its turn counts on that). Best effort: a failure is logged,
/// and the batches find a cold connection as they would have.
pub async fn connections(pool: &PgPool, connections: u32, strategy: Strategy) {
    let mut held = Vec::new();
    for _ in 0..connections {
        match pool.acquire().await {
            Ok(conn) => held.push(conn),
            Err(e) => {
                tracing::warn!(error = %e, "cannot warm the worker's connections");
                break;
            }
        }
    }
    for conn in &mut held {
        logged(conn, strategy).await;
    }
}

/// For the pool's `after_connect`: warm each connection it opens once
/// `ready` is set. The pool's first connections are opened before the
/// migrations run (the statements would fail), and [`connections`] warms
/// them.
pub fn on_connect(
    strategy: Strategy,
    ready: Arc<AtomicBool>,
) -> impl for<'c> Fn(&'c mut PgConnection, PoolConnectionMetadata) -> BoxFuture<'c, Result<(), sqlx::Error>>
+ Send
+ Sync
+ 'static {
    move |conn, _| {
        let ready = ready.load(Ordering::Acquire);
        Box::pin(async move {
            if ready {
                logged(conn, strategy).await;
            }
            Ok(())
        })
    }
}

async fn logged(conn: &mut PgConnection, strategy: Strategy) {
    if let Err(e) = one(conn, strategy).await {
        tracing::warn!(error = %e, "warming a connection failed; its first batch will be slower");
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
