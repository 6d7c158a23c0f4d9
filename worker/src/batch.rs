//! One batch, one transaction: claim up to B requests; confirm, cancel and
//! extend one per savepoint (`manage`); then allocate seats to every hold
//! and book together under one (`allocate`, which chooses in `choose` and
//! takes in `take`; a batch of holds and bookings alone needs no savepoint);
//! record every outcome (`record`); commit once. Seat changes and outcomes
//! commit together, so a crash leaves neither; the claim is the row lock, so
//! a dead worker's requests are free again the moment its connection goes.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt as _;

use crate::sql::claim::{self, Claimed, Finished};
use crate::sql::line::ServeLines;
use seatq_core::customer;
use seatq_core::outcome::BookingState;
use seatq_core::request::Request;
use sqlx::postgres::PgConnection;
use sqlx::{Acquire, PgPool};

use crate::Strategy;
use crate::allocate;
use crate::choose::Wanted;
use crate::decision::{Decision, ProcessError};
use crate::fault;
use crate::manage;
use crate::metrics::Metrics;
use crate::record::Outcome;
use crate::wake::Wake;
use seatq_core::retry::Jitter;

/// Most savepoints a batch takes: one per request processed alone, one for
/// its holds and bookings. A savepoint may use two subtransaction
/// ids, and past 64 in one transaction PostgreSQL's per-backend
/// subtransaction cache overflows, which slows every snapshot on the server.
/// The requests claimed after the last one processed wait for the next batch.
pub const MAX_SAVEPOINTS: usize = 32;

/// Which requests a batch claims.
#[derive(Debug)]
pub enum Claim<'a> {
    /// The next due requests, up to this many.
    Next(i64),
    /// These contended requests again (id → contention retries so far).
    /// With `requeue`, any still contended go back to the queue for later.
    Retry { ids: &'a HashMap<i64, i32>, requeue: Option<Duration> },
}

/// What a batch did.
#[derive(Debug, Default)]
pub struct Report {
    /// Requests claimed.
    pub claimed: usize,
    /// Requests given a terminal outcome.
    pub finished: usize,
    /// Requests put back in the queue (transient error or persistent contention).
    pub requeued: usize,
    /// Contended requests to retry after a backoff (id → retries so far).
    pub contended: HashMap<i64, i32>,
    /// Requests claimed but left untouched for the next batch (past
    /// [`MAX_SAVEPOINTS`], or line requests behind others: `OUT_OF_LINE`):
    /// they are due now.
    pub left_over: usize,
    /// The claim's ticket (see `Wake`); 0 without one.
    pub ticket: u64,
    /// Requests that joined their event's waiting list (their outcome is
    /// the database's to record: [`Decision::Listed`]).
    pub listed: usize,
}

/// How a batch serves its requests: with its strategy, and routed to its
/// one event on a database sharded by event.
#[derive(Debug, Clone, Copy)]
struct Serve {
    strategy: Strategy,
    route: Option<i64>,
}

/// A request a batch claimed: enough to count a failed attempt for it if the
/// whole batch fails (see [`record_failed_attempt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InHand {
    pub id: i64,
    /// Failed attempts when claimed.
    pub attempts: i32,
    /// The batch's route ([`run`]).
    pub route: Option<i64>,
}

/// Run one batch transaction. `in_hand` is set to the requests it claims and
/// emptied once their outcomes commit, so if the batch fails, or is dropped
/// mid-way (a timeout), it says which requests were in it. With `wake`, a
/// claim of the next due requests says how it went: if it comes back full,
/// more are likely waiting, and the next batch loop is woken at once to start
/// on them while this one works. `route`: claim and serve this event's
/// requests alone, every statement sent to its shard, on a database sharded
/// by event ([`seatq_core::sql::route`]); `None` on one server, where a batch
/// spans events.
pub async fn run(
    pool: &PgPool,
    claim: Claim<'_>,
    route: Option<i64>,
    strategy: Strategy,
    metrics: &Metrics,
    in_hand: &mut Vec<InHand>,
    wake: Option<&Wake>,
) -> Result<Report, ProcessError> {
    in_hand.clear();
    let ticket = wake.map_or(0, Wake::ticket);
    let mut tx = match strategy {
        Strategy::Serializable => pool.begin_with(claim::BEGIN_SERIALIZABLE).await?,
        _ => pool.begin().await?,
    };
    let mut rows: Vec<Claimed> = match &claim {
        Claim::Next(limit) => claim::ClaimBatch { limit: *limit, route }.query().fetch_all(&mut *tx).await?,
        Claim::Retry { ids, .. } => {
            let ids: Vec<i64> = ids.keys().copied().collect();
            claim::ClaimByIds { ids: &ids, route }.query().fetch_all(&mut *tx).await?
        }
    };
    let claimed = rows.len();
    let line = rows.iter().any(|r| r.line);
    let behind = in_line(&mut tx, &mut rows, route).await?;
    in_hand.extend(rows.iter().map(|r| InHand { id: r.id, attempts: r.attempts, route }));
    if let Claim::Next(limit) = claim
        && let Some(wake) = wake
    {
        if (claimed as i64) < limit {
            wake.claimed_short(ticket);
        } else if limit > 1 && !line {
            // (A claim of one is the careful mode after a failure: no reason
            // to draw another loop in. Nor is a claim of an event's line:
            // this batch holds the line, and another loop's claim would
            // only step over it, request by request, to find the rest.)
            wake.next();
        }
    }
    // Line requests left for the next claim count as left over: due now.
    let mut report = Report { claimed, ticket, left_over: behind, ..Report::default() };
    let serve = Serve { strategy, route };
    if rows.is_empty() {
        tx.rollback().await?;
        if line && let Some(wake) = wake {
            wake.released();
        }
        return Ok(report);
    }
    if matches!(claim, Claim::Next(_)) {
        metrics.batch(rows.len());
    }

    let mut outcomes = Vec::with_capacity(rows.len());
    let mut decoded = Vec::with_capacity(rows.len());
    for row in &rows {
        match Request::decode(&row.kind, &row.payload) {
            Ok(request) => decoded.push((row, request)),
            Err(e) => outcomes.push(Outcome::failed(row.id, e.code, e.message, retries_of(&claim, row.id))),
        }
    }
    // Confirms, cancels and extends one at a time, in claim order, each
    // under its own savepoint; then every hold and book of the batch at once,
    // set-based, under one (`allocate`), so that they find the seats a cancel
    // gave back. A request carrying an injected fault is processed alone, so
    // that it fires where a single request would.
    //
    // A batch of holds and bookings alone (the common case) takes no
    // savepoint, two round trips fewer, where the strategy never fails on
    // contention: if its allocation fails, the batch fails and rolls back, as
    // one whose connection broke would, and the loop claims one request at a
    // time for a while, which finds the request that broke it (see `Worker`).
    let (takers, singles): (Vec<_>, Vec<_>) = decoded.iter().partition(is_taker);
    let whole = singles.is_empty() && !strategy.fails_on_contention();
    // One savepoint is kept for the holds and bookings.
    let reserved = usize::from(!takers.is_empty() && !whole);
    let mut savepoints = 0;
    for (row, request) in &singles {
        // Past MAX_SAVEPOINTS savepoints, the rest stay queued for the next
        // batch (left over).
        if savepoints + reserved == MAX_SAVEPOINTS {
            break;
        }
        savepoints += 1;
        outcomes.extend(alone(&mut tx, row, request, serve, &claim, &mut report).await?);
    }
    if !takers.is_empty() {
        savepoints += reserved;
        if !take_all(&mut tx, &takers, whole, serve, &claim, &mut outcomes, &mut report).await? {
            for (row, request) in &takers {
                // Likewise.
                if savepoints == MAX_SAVEPOINTS {
                    break;
                }
                savepoints += 1;
                outcomes.extend(alone(&mut tx, row, request, serve, &claim, &mut report).await?);
            }
        }
    }

    // Seats that cancels gave back go to their events' waiting lists first,
    // in this transaction: once per event, last, so that the event's line
    // (which a hand-over holds) is held only until the commit.
    let mut freed: Vec<i64> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref())
        .filter(|b| b.state == BookingState::Cancelled)
        .map(|b| b.event)
        .collect();
    freed.sort_unstable();
    freed.dedup();
    if !freed.is_empty() {
        ServeLines { events: &freed, wait: true }.query().fetch_one(&mut *tx).await?;
    }
    report.left_over = behind + rows.len() - outcomes.len() - report.contended.len() - report.listed;
    for o in &outcomes {
        if o.requeues() {
            report.requeued += 1;
        } else {
            report.finished += 1;
        }
    }
    let finished: Vec<Finished> = if outcomes.is_empty() {
        Vec::new()
    } else {
        claim::RecordOutcomes { outcomes: &outcomes, route }.query().fetch_all(&mut *tx).await?
    };
    tx.commit().await?;
    in_hand.clear();
    // The commit let go of the lines of the events whose line requests it
    // claimed, or whose cancels served their waiting lists: other claims
    // skipped those events' line requests meanwhile, and they are claimable
    // now (the next claim must not take those claims' coming back short
    // for a drained queue). A line it claimed, its own loop goes on with;
    // one a cancel held may have sent the line's loop idle: wake one.
    if let Some(wake) = wake {
        if line {
            wake.released();
        } else if !freed.is_empty() {
            wake.news();
        }
    }
    announce(pool, &finished, metrics).await;
    Metrics::add(&metrics.contention_retries, report.contended.len() as u64);
    Metrics::add(&metrics.requeued, report.requeued as u64);
    Ok(report)
}

/// Serve of each event's line requests only those at the head of its line:
/// where the claim took requests behind others ([`claim::OUT_OF_LINE`]),
/// as many from the head instead ([`claim::LINE_HEAD`]); those behind stay
/// queued, untouched, for the next claim. Returns how many of the claimed
/// it left so.
async fn in_line(tx: &mut PgConnection, rows: &mut Vec<Claimed>, route: Option<i64>) -> Result<usize, ProcessError> {
    let mut first: HashMap<i64, i64> = HashMap::new();
    for r in rows.iter().filter(|r| r.line) {
        let id = first.entry(r.event_id).or_insert(r.id);
        *id = (*id).min(r.id);
    }
    if first.is_empty() {
        return Ok(0);
    }
    let (events, firsts): (Vec<i64>, Vec<i64>) = first.into_iter().unzip();
    let behind = claim::OutOfLine { events: &events, first: &firsts, route }.query().fetch_all(&mut *tx).await?;
    let mut left = 0;
    for event in behind {
        let mine: HashSet<i64> = rows.iter().filter(|r| r.line && r.event_id == event).map(|r| r.id).collect();
        tracing::debug!(event, requests = mine.len(), "claimed line requests behind others; serving the line's head");
        rows.retain(|r| !(r.line && r.event_id == event));
        let head = claim::LineHead { event, limit: mine.len() as i64, route }.query().fetch_all(&mut *tx).await?;
        left += mine.len() - head.iter().filter(|r| mine.contains(&r.id)).count();
        rows.extend(head);
    }
    Ok(left)
}

/// Count a failed attempt for a request whose whole batch failed (its
/// outcome was never recorded), in a transaction of its own: back to the
/// queue after a backoff, or `dead` after `max_attempts`, keeping `error`.
/// Does nothing (false) if the request is no longer queued with the attempts
/// it was claimed with (the batch did commit, or another worker dealt with
/// it), or is locked (by a failed transaction not yet ended, or a worker that
/// claimed it since).
pub async fn record_failed_attempt(
    pool: &PgPool,
    request: InHand,
    error: &str,
    metrics: &Metrics,
) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let rows = claim::ClaimByIds { ids: &[request.id], route: request.route }.query().fetch_all(&mut *tx).await?;
    let Some(row) = rows.iter().find(|r| r.attempts == request.attempts) else {
        tx.rollback().await?;
        return Ok(false);
    };
    let outcome = transient(row, &format!("its batch failed: {error}"), 0);
    let requeued = outcome.requeues();
    let finished =
        claim::RecordOutcomes { outcomes: &[outcome], route: request.route }.query().fetch_all(&mut *tx).await?;
    tx.commit().await?;
    announce(pool, &finished, metrics).await;
    if requeued {
        Metrics::add(&metrics.requeued, 1);
    }
    Ok(true)
}

/// After the outcomes commit: count them, and wake the clients waiting on
/// them (see [`claim::NOTIFY_DONE`] for why not inside the batch). NOTIFY is
/// a hint: if it fails, clients still find the outcome when they poll.
async fn announce(pool: &PgPool, finished: &[Finished], metrics: &Metrics) {
    if finished.is_empty() {
        return;
    }
    for f in finished {
        metrics.finished(&f.kind, &f.outcome, f.latency_secs);
    }
    let ids: Vec<i64> = finished.iter().map(|f| f.id).collect();
    let notify = claim::NotifyDone { ids: &ids, channel: seatq_core::sql::notify::DONE_CHANNEL };
    if let Err(e) = notify.query().execute(pool).await {
        tracing::warn!(error = %e, requests = ids.len(), "could not notify waiting clients; they will poll");
    }
}

/// Contention retries so far of a claimed request.
fn retries_of(claim: &Claim<'_>, id: i64) -> i32 {
    match claim {
        Claim::Retry { ids, .. } => ids.get(&id).copied().unwrap_or_default(),
        Claim::Next(_) => 0,
    }
}

/// Is this a hold or book, taken with the rest of its batch? (An injected
/// fault is processed alone, so that it fires.)
fn is_taker((_, request): &&(&Claimed, Request)) -> bool {
    matches!(request, Request::Hold(_) | Request::Book(_)) && fault::injected(request).is_none()
}

/// Process one request under its own savepoint, returning its outcome (none
/// for a contended one to retry after a backoff, in `report.contended`).
async fn alone(
    tx: &mut PgConnection,
    row: &Claimed,
    request: &Request,
    serve: Serve,
    claim: &Claim<'_>,
    report: &mut Report,
) -> Result<Option<Outcome>, ProcessError> {
    let Serve { strategy, route } = serve;
    let retries = retries_of(claim, row.id);
    let mut savepoint = tx.begin().await?;
    // A panic while processing one request fails that request (counted as an
    // attempt), not the worker or the rest of the batch.
    let result = caught(manage::process(
        &mut savepoint,
        row.id,
        &row.producer,
        row.token_hash.as_deref(),
        request,
        strategy,
        route,
    ))
    .await;
    // Every ending but Done gives the request's seat changes back. If even
    // that fails, the connection is gone: the whole batch rolls back and its
    // requests return to the queue untouched.
    if let Ok(Decision::Done(_) | Decision::Listed) = result {
        savepoint.commit().await?;
    } else {
        savepoint.rollback().await?;
    }
    Ok(outcome_of(row, result, claim, retries, report))
}

/// Take seats for the batch's holds and bookings at once, under one
/// savepoint, adding their outcomes. False if it failed unexpectedly: the
/// seat changes are rolled back and the caller processes them one request
/// at a time, to find out which request it was. `whole`: they are the whole
/// batch, and take no savepoint; an error fails the batch.
async fn take_all(
    tx: &mut PgConnection,
    takers: &[&(&Claimed, Request)],
    whole: bool,
    serve: Serve,
    claim: &Claim<'_>,
    outcomes: &mut Vec<Outcome>,
    report: &mut Report,
) -> Result<bool, ProcessError> {
    let Serve { strategy, route } = serve;
    // Customers are counted in their normal form.
    let keys: Vec<_> = takers.iter().map(|(_, request)| customer::normal_form(request.customer())).collect();
    let wanted: Vec<Wanted> = takers
        .iter()
        .zip(&keys)
        .filter_map(|((row, request), key)| Wanted::of(row.id, &row.producer, row.token_hash.as_deref(), key, request))
        .collect();
    let add = |decisions: Vec<Decision>, outcomes: &mut Vec<Outcome>, report: &mut Report| {
        for ((row, _), decision) in takers.iter().copied().zip(decisions) {
            outcomes.extend(outcome_of(row, Ok(decision), claim, retries_of(claim, row.id), report));
        }
    };
    if whole {
        add(caught(allocate::allocate(tx, &wanted, strategy, route)).await?, outcomes, report);
        return Ok(true);
    }
    let mut savepoint = tx.begin().await?;
    match caught(allocate::allocate(&mut savepoint, &wanted, strategy, route)).await {
        Ok(decisions) => {
            savepoint.commit().await?;
            add(decisions, outcomes, report);
            Ok(true)
        }
        Err(e) if e.is_contention() => {
            // A NOWAIT lock or a serialization failure: every one of them
            // tries again.
            savepoint.rollback().await?;
            for (row, _) in takers.iter().copied() {
                outcomes.extend(outcome_of(row, Ok(Decision::Contended), claim, retries_of(claim, row.id), report));
            }
            Ok(true)
        }
        Err(e) => {
            savepoint.rollback().await?;
            tracing::warn!(error = %e, requests = takers.len(), "batch allocation failed; one at a time");
            Ok(false)
        }
    }
}

/// The outcome to record for one processed request, if any: a contended
/// request to retry after a backoff goes into `report.contended` instead.
fn outcome_of(
    row: &Claimed,
    result: Result<Decision, ProcessError>,
    claim: &Claim<'_>,
    retries: i32,
    report: &mut Report,
) -> Option<Outcome> {
    match result {
        Ok(Decision::Done(booking)) => Some(Outcome::succeeded(row.id, booking, retries)),
        Ok(Decision::Reject(code, message)) => Some(Outcome::failed(row.id, code, message, retries)),
        Ok(Decision::Listed) => {
            report.listed += 1;
            None
        }
        // Contended, or lock_timeout (the safety net) fired: not a failure.
        Ok(Decision::Contended) => contended(row, claim, retries, report),
        Err(e) if e.is_contention() => contended(row, claim, retries, report),
        Err(e) => Some(transient(row, &e.to_string(), retries)),
    }
}

/// A contended request: retry after a backoff, or after the last retry, back
/// to the queue for later.
fn contended(row: &Claimed, claim: &Claim<'_>, retries: i32, report: &mut Report) -> Option<Outcome> {
    match claim {
        Claim::Retry { requeue: Some(delay), .. } => {
            tracing::debug!(request = row.id, "still contended; back to the queue");
            Some(Outcome::requeued(row.id, *delay, retries + 1))
        }
        _ => {
            report.contended.insert(row.id, retries + 1);
            None
        }
    }
}

/// An unexpected error while processing one request: count the attempt, and
/// retry after a backoff, or give up (`dead`) after `max_attempts`.
fn transient(row: &Claimed, e: &str, retries: i32) -> Outcome {
    let attempts = row.attempts + 1;
    let message = format!("attempt {attempts} of {}: {e}", row.max_attempts);
    if attempts >= row.max_attempts {
        tracing::error!(request = row.id, error = %e, "request failed too often; marking it dead");
        return Outcome::dead(row.id, message, retries);
    }
    let delay = Jitter::failed_request(attempts as u32);
    tracing::warn!(request = row.id, error = %e, retry_in = ?delay, "request failed; will retry");
    Outcome::retry(row.id, message, delay, retries)
}

/// A panic while processing becomes an unexpected error of that request (or
/// batch), not the end of the worker.
async fn caught<T>(work: impl Future<Output = Result<T, ProcessError>>) -> Result<T, ProcessError> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(ProcessError::Internal(format!("panicked: {}", panic_message(&panic)))))
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use seatq_core::outcome::{BookingResult, BookingState, ErrorCode, Status};
    use serde_json::Value;

    use super::*;

    fn claimed(attempts: i32) -> Claimed {
        Claimed {
            id: 9,
            event_id: 1,
            producer: "shop".into(),
            kind: "hold".into(),
            payload: Value::Null,
            token_hash: None,
            attempts,
            max_attempts: 3,
            line: false,
        }
    }

    fn booking() -> BookingResult {
        BookingResult {
            booking: 1,
            event: 7,
            customer: "ann".into(),
            state: BookingState::Held,
            seats: Vec::new(),
            total_cents: 0,
            held_until: None,
            capped: false,
        }
    }

    #[test]
    fn a_decision_becomes_the_outcome_recorded() {
        let mut report = Report::default();
        let next = Claim::Next(10);
        let done = outcome_of(&claimed(0), Ok(Decision::Done(booking())), &next, 2, &mut report).expect("recorded");
        assert_eq!((done.status, done.contended), (Status::Succeeded, 2));
        let refused = Decision::Reject(ErrorCode::SoldOut, "none left".into());
        let failed = outcome_of(&claimed(0), Ok(refused), &next, 0, &mut report).expect("recorded");
        assert_eq!((failed.status, failed.error_code), (Status::Failed, Some(ErrorCode::SoldOut)));
        assert!(report.contended.is_empty());
    }

    #[test]
    fn a_contended_request_is_retried_then_requeued() {
        let mut report = Report::default();
        assert!(outcome_of(&claimed(0), Ok(Decision::Contended), &Claim::Next(10), 0, &mut report).is_none());
        assert_eq!(report.contended, HashMap::from([(9, 1)]));
        let ids = HashMap::from([(9, 3)]);
        assert_eq!(retries_of(&Claim::Retry { ids: &ids, requeue: None }, 9), 3);
        assert_eq!(retries_of(&Claim::Next(10), 9), 0);
        let mut report = Report::default();
        let again = Claim::Retry { ids: &ids, requeue: None };
        assert!(outcome_of(&claimed(0), Ok(Decision::Contended), &again, 3, &mut report).is_none());
        assert_eq!(report.contended, HashMap::from([(9, 4)]));
        // After its last retry: back to the queue, due after the delay.
        let mut report = Report::default();
        let last = Claim::Retry { ids: &ids, requeue: Some(Duration::from_millis(200)) };
        let requeued = outcome_of(&claimed(0), Ok(Decision::Contended), &last, 5, &mut report).expect("requeued");
        assert_eq!((requeued.status, requeued.retry_in_ms, requeued.contended), (Status::Queued, Some(200), 6));
        assert!(!requeued.failed_attempt && report.contended.is_empty());
    }

    #[test]
    fn an_unexpected_error_counts_an_attempt_until_the_last() {
        let mut report = Report::default();
        let broken = || Err(ProcessError::Internal("broken".into()));
        let retry = outcome_of(&claimed(0), broken(), &Claim::Next(10), 0, &mut report).expect("recorded");
        assert_eq!((retry.status, retry.error_code), (Status::Queued, Some(ErrorCode::Internal)));
        assert!(retry.failed_attempt && retry.retry_in_ms.is_some());
        assert_eq!(retry.error_message.as_deref(), Some("attempt 1 of 3: broken"));
        let dead = outcome_of(&claimed(2), broken(), &Claim::Next(10), 0, &mut report).expect("recorded");
        assert_eq!((dead.status, dead.retry_in_ms), (Status::Dead, None));
        assert_eq!(dead.error_message.as_deref(), Some("attempt 3 of 3: broken"));
    }

    #[tokio::test]
    async fn a_panic_is_an_error_of_its_request() {
        async fn panicking(payload: Box<dyn std::any::Any + Send>) -> Result<(), ProcessError> {
            std::panic::resume_unwind(payload)
        }
        let said = caught(panicking(Box::new(String::from("at 7")))).await;
        assert!(matches!(&said, Err(ProcessError::Internal(m)) if m == "panicked: at 7"), "{said:?}");
        let quoted = caught(panicking(Box::new("quoted"))).await;
        assert!(matches!(&quoted, Err(ProcessError::Internal(m)) if m == "panicked: quoted"), "{quoted:?}");
        let other = caught(panicking(Box::new(3_u8))).await;
        assert!(matches!(&other, Err(ProcessError::Internal(m)) if m == "panicked: unknown panic"), "{other:?}");
    }
}
