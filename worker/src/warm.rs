//! Warming a worker's connections before their first batch.
//!
//! A new session's first batch pays for loading the catalog entries of every
//! table and index a batch touches, compiling `seatq.lock_cheapest_spread`
//! and planning every statement, so the first batches of a freshly started
//! worker are several times slower than later ones, and on a hot event the
//! queue they leave behind takes a while to clear. So a worker runs
//! each of a batch's statements once on every connection, with nothing to
//! claim, lock or record, and rolls back, as the pool opens it: at start,
//! and later (replacing one past its lifetime, or after the server
//! restarted).

use crate::sql::{allocation, claim};
use futures_util::future::BoxFuture;
use sqlx::Acquire;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::postgres::PgConnection;

use crate::decision::ProcessError;
use crate::{Strategy, take};

/// For the worker pool's `after_connect`: give each connection the worker's
/// session settings ([`crate::worker::settle`]: a connection to a standby,
/// or one the settings cannot be given, is refused), then warm it as the
/// pool opens it (the pool opens its first ones one after another, so warming
/// them is never more than one transaction on the server, which a batch loop
/// waiting for its turn counts on). Warming is best effort: a failure is
/// logged, and the batches find a cold connection as they would have.
pub fn on_connect(
    strategy: Strategy,
    synchronous_standby: bool,
) -> impl for<'c> Fn(&'c mut PgConnection, PoolConnectionMetadata) -> BoxFuture<'c, Result<(), sqlx::Error>>
+ Send
+ Sync
+ 'static {
    move |conn, _| {
        Box::pin(async move {
            crate::worker::settle(conn, synchronous_standby).await?;
            if let Err(e) = one(conn, strategy).await {
                tracing::warn!(error = %e, "warming a connection failed; its first batch will be slower");
            }
            Ok(())
        })
    }
}

/// Run a batch's statements once, with empty inputs (their params structs'
/// `Default`, as the batch binds them), and roll back.
async fn one(conn: &mut PgConnection, strategy: Strategy) -> Result<(), ProcessError> {
    let mut tx = conn.begin().await?;
    // On Citus the batches' statements are routed (to an event: any will
    // do, with nothing to read); the texts are then the routed ones.
    let route = seatq_core::citus::distributed(&mut tx).await?.then_some(0);
    claim::ClaimBatch { limit: 0, route }.query().fetch_all(&mut *tx).await?;
    // Every statement of `crate::allocate`, with nothing to lock or read.
    allocation::LockCheapest { strategy, route, ..Default::default() }.query().fetch_all(&mut *tx).await?;
    allocation::CountFree { route, ..Default::default() }.query().fetch_all(&mut *tx).await?;
    allocation::EventRules::default().query().fetch_all(&mut *tx).await?;
    allocation::LockNamed { route, ..Default::default() }.query().fetch_all(&mut *tx).await?;
    allocation::FreeRuns { route, ..Default::default() }.query().fetch_all(&mut *tx).await?;
    allocation::LockFreeSeats { route, ..Default::default() }.query().fetch_all(&mut *tx).await?;
    allocation::CustomerSeats::default().query().fetch_all(&mut *tx).await?;
    take::take_seats(&mut tx, &[], route).await?;
    claim::RecordOutcomes { route, ..Default::default() }.query().fetch_all(&mut *tx).await?;
    // (On Citus the spread function is planned where it runs, beside the
    // shards, not on this connection.)
    if route.is_none() {
        allocation::WarmSpread.query().fetch_one(&mut *tx).await?;
    }
    tx.rollback().await?;
    Ok(())
}
