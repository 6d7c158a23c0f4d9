//! Active expiry: free lapsed holds in the background. Availability never
//! depends on it (every allocation treats a lapsed hold as free); it keeps
//! seat and booking states tidy for people and reports, and announces each
//! hold it marks expired on `HOLD_LAPSED_CHANNEL`, so that a storefront can
//! tell its customer at once.

use std::sync::Arc;
use std::time::Duration;

use crate::sql::{claim, expiry, line};
use seatq_core::sql::notify::HOLD_LAPSED_CHANNEL;
use sqlx::{Acquire as _, PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::periodic::{Messages, Periodic, Round, Task};

/// Rows changed per sweep transaction, to keep each one short.
const SWEEP_BATCH: i64 = 1000;

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Held seats made available again.
    pub seats: i64,
    /// Holds marked expired.
    pub bookings: i64,
    /// Waiting parties served from their waiting list, or whose wait ended.
    pub waiting: i64,
}

/// Sweep until nothing lapsed is left (each pass one short transaction).
pub async fn sweep(pool: &PgPool) -> Result<Swept, sqlx::Error> {
    let mut total = Swept::default();
    loop {
        let (pass, more) = sweep_once(pool).await?;
        total.add(pass);
        if !more {
            return Ok(total);
        }
    }
}

/// One pass: up to `SWEEP_BATCH` seats and holds, in one short transaction
/// (on Citus, one per event with lapsed holds, each on that event's node).
/// Returns what it did and whether more may be left.
pub async fn sweep_once(pool: &PgPool) -> Result<(Swept, bool), sqlx::Error> {
    let mut conn = pool.acquire().await?;
    if !seatq_core::citus::distributed(&mut conn).await? {
        return sweep_one(&mut conn, None).await;
    }
    let mut events = expiry::EventsWithLapsedHolds { bookings: false }.query().fetch_all(&mut *conn).await?;
    events.extend(expiry::EventsWithLapsedHolds { bookings: true }.query().fetch_all(&mut *conn).await?);
    events.extend(line::EventsWithWaiting { route: None }.query().fetch_all(&mut *conn).await?);
    events.sort_unstable();
    events.dedup();
    let (mut total, mut more) = (Swept::default(), false);
    for event in events {
        let (swept, left) = sweep_one(&mut conn, Some(event)).await?;
        total.add(swept);
        more |= left;
    }
    Ok((total, more))
}

/// One transaction of a pass, of one event's holds where `route` names one.
async fn sweep_one(conn: &mut PgConnection, route: Option<i64>) -> Result<(Swept, bool), sqlx::Error> {
    let mut tx = conn.begin().await?;
    let seats = expiry::SweepSeats { limit: SWEEP_BATCH, route }.query().fetch_one(&mut *tx).await?;
    let expired = expiry::SweepBookings { limit: SWEEP_BATCH, route }.query().fetch_all(&mut *tx).await?;
    // Each expired hold is announced on HOLD_LAPSED_CHANNEL from inside this
    // transaction: a listener woken by it reads the booking already expired.
    if !expired.is_empty() {
        claim::NotifyDone { ids: &expired, channel: HOLD_LAPSED_CHANNEL }.query().execute(&mut *tx).await?;
    }
    // The seats freed go to the events' waiting lists first, in this
    // transaction; and waits that are over end. A list another transaction
    // is serving (-1) is left to it.
    let mut lists = line::EventsWithWaiting { route }.query().fetch_all(&mut *tx).await?;
    lists.sort_unstable();
    let waiting = match lists.is_empty() {
        true => 0,
        false => line::ServeLines { events: &lists, wait: false }.query().fetch_one(&mut *tx).await?,
    };
    tx.commit().await?;
    let bookings = expired.len() as i64;
    Ok((Swept { seats, bookings, waiting }, seats >= SWEEP_BATCH || bookings >= SWEEP_BATCH))
}

impl Swept {
    fn add(&mut self, pass: Swept) {
        self.seats += pass.seats;
        self.bookings += pass.bookings;
        self.waiting += pass.waiting;
    }
}

/// Sweep every `interval` until cancelled. Cancellation is checked between
/// passes, and a pass waiting on the database (an outage) is abandoned
/// (its transaction rolls back; the next worker to sweep does its work).
pub async fn run(pool: PgPool, interval: Duration, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    let periodic = Periodic {
        interval,
        backoff: None,
        messages: Messages {
            failed: "sweep failed; will try again",
            // Say so once, not every interval of a long outage.
            failed_again: Some("sweep failed again"),
            recovered: Some("sweeping again"),
        },
    };
    periodic.run(&mut Sweeper { pool, metrics }, &shutdown).await;
}

/// The background sweeper: a round sweeps until nothing lapsed is left.
struct Sweeper {
    pool: PgPool,
    metrics: Arc<Metrics>,
}

impl Task for Sweeper {
    async fn round(&mut self, shutdown: &CancellationToken) -> Round {
        let mut total = Swept::default();
        let result = loop {
            let Some(pass) = shutdown.run_until_cancelled(sweep_once(&self.pool)).await else { break Round::Done };
            match pass {
                Ok((swept, more)) => {
                    Metrics::add(&self.metrics.seats_expired, swept.seats as u64);
                    Metrics::add(&self.metrics.holds_expired, swept.bookings as u64);
                    total.add(swept);
                    if !more || shutdown.is_cancelled() {
                        break Round::Done;
                    }
                }
                Err(e) => break Round::Failed(e),
            }
        };
        if total.seats + total.bookings > 0 {
            tracing::info!(seats = total.seats, bookings = total.bookings, "expired lapsed holds");
        }
        if total.waiting > 0 {
            tracing::info!(parties = total.waiting, "served waiting lists");
        }
        result
    }
}
