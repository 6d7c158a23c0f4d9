//! The waiting list, from the batch's side: requests that asked to wait
//! (`wait_seconds`) and were refused for want of seats join their event's
//! waiting list instead, in the batch's transaction (`seatq.join_line`,
//! migrations/0012_waiting_list.sql), which serves the list at once. The
//! database records what became of each (waiting, or served, or its wait
//! already over) and announces it; the batch records nothing more for them.

use std::collections::BTreeMap;

use seatq_core::outcome::ErrorCode;
use sqlx::PgConnection;

use crate::choose::Wanted;
use crate::decision::{Decision, ProcessError};
use crate::sql::line::JoinLine;

/// Whether a request refused so may wait instead: it asked to, and was
/// refused for want of seats (`sold_out`; `no_adjacent_seats` side by side).
fn waits(w: &Wanted<'_>, decision: &Decision) -> bool {
    w.request.wait_seconds.is_some()
        && matches!(decision, Decision::Reject(ErrorCode::SoldOut | ErrorCode::NoAdjacentSeats, _))
}

/// Put the requests of the batch (`wanted`, decided as `decisions`) that
/// may wait on their events' waiting lists, one statement per event; each
/// becomes [`Decision::Listed`], or [`Decision::Contended`] if another
/// transaction holds its event's line, or stays refused (`sold_out`, saying
/// so) if the event's list is closed.
pub async fn join(
    conn: &mut PgConnection,
    wanted: &[Wanted<'_>],
    decisions: &mut [Option<Decision>],
) -> Result<(), ProcessError> {
    let mut by_event: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, (w, d)) in wanted.iter().zip(decisions.iter()).enumerate() {
        if d.as_ref().is_some_and(|d| waits(w, d)) {
            by_event.entry(w.request.event).or_default().push(i);
        }
    }
    for (event, joining) in by_event {
        let requests: Vec<i64> = joining.iter().map(|&i| wanted[i].request_id).collect();
        // The customer as the limit counts them, where not the name given.
        let keys: Vec<Option<&str>> = joining
            .iter()
            .map(|&i| Some(wanted[i].customer_key).filter(|k| *k != wanted[i].request.customer))
            .collect();
        let rows = JoinLine { event, requests: &requests, customer_keys: &keys }.query().fetch_all(&mut *conn).await?;
        for (&i, row) in joining.iter().zip(&rows) {
            if row.request_id != wanted[i].request_id {
                return Err(ProcessError::Internal(format!(
                    "the waiting list answered for request {} when asked about {}",
                    row.request_id, wanted[i].request_id
                )));
            }
            decisions[i] = Some(match row.status.as_str() {
                "contended" => Decision::Contended,
                "closed" => Decision::Reject(
                    ErrorCode::SoldOut,
                    format!("sold out, and the waiting list of event {event} is closed"),
                ),
                _ => Decision::Listed,
            });
        }
        if rows.len() != joining.len() {
            return Err(ProcessError::Internal(format!(
                "the waiting list of event {event} answered for {} of {} requests",
                rows.len(),
                joining.len()
            )));
        }
    }
    Ok(())
}
