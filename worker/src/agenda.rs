//! Which event a batch serves next, on a database sharded by event (Citus).
//!
//! On one server a batch claims the next due requests whatever their event.
//! On Citus a claim that spans shards cannot lock rows (Citus refuses
//! `FOR UPDATE` across shards), and a transaction that writes on two nodes
//! commits in two phases; so each batch claims and serves one event's
//! requests, every statement routed to that event's node
//! ([`seatq_core::sql::route`]). The agenda keeps the events known to have
//! due requests, and hands them to the batch loops in turn:
//!
//! - an enqueue announces its event (`seatq_new` with the event id, sent by
//!   `seatq.enqueue` on the coordinator), and the listener adds it;
//! - a claim of an event that comes back short drops it;
//! - when the agenda is empty, or every [`REFRESH`] whatever it holds, one
//!   read over every shard ([`EVENTS_WITH_WORK`]: no lock, no write) finds
//!   the events with due requests that no announcement named: requests
//!   inserted by plain INSERT, retries falling due, requests a dead worker
//!   left.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::sql::Scalars;

/// How often the agenda is read from the database even when it is not
/// empty, so that an event no announcement named is served within it.
pub const REFRESH: Duration = Duration::from_secs(1);
/// The least time between two reads when the agenda is empty (idle loops
/// polling must not each read every shard).
const EMPTY_REREAD: Duration = Duration::from_millis(50);

/// The events with due requests (at most 10,000: more are found as these
/// drain). A read over every shard, without locks.
pub const EVENTS_WITH_WORK: &str = "
SELECT DISTINCT event_id FROM seatq.requests
WHERE status = 'queued' AND run_at <= now()
LIMIT 10000";

/// The parameters of [`EVENTS_WITH_WORK`]: none.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventsWithWork;

impl EventsWithWork {
    pub fn query(&self) -> Scalars<'static, i64> {
        sqlx::query_scalar(EVENTS_WITH_WORK)
    }
}

/// The events a process's batch loops serve next (see the module's doc).
#[derive(Debug, Default)]
pub struct Agenda {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// In the order the loops take them; each event at most once.
    events: VecDeque<i64>,
    read_at: Option<Instant>,
}

impl Agenda {
    /// The next event to serve, read from the database if due; `None` if no
    /// event has due requests.
    pub async fn next(&self, pool: &PgPool) -> Result<Option<i64>, sqlx::Error> {
        if self.due() {
            let events = EventsWithWork.query().fetch_all(pool).await?;
            let mut state = self.lock();
            state.read_at = Some(Instant::now());
            for event in events {
                if !state.events.contains(&event) {
                    state.events.push_back(event);
                }
            }
        }
        let mut state = self.lock();
        // Round the ring: the event goes to the back, for the next loop to
        // take another first.
        let event = state.events.pop_front();
        if let Some(event) = event {
            state.events.push_back(event);
        }
        Ok(event)
    }

    /// An announcement named this event: it has new requests.
    pub fn heard(&self, event: i64) {
        let mut state = self.lock();
        if !state.events.contains(&event) {
            state.events.push_front(event);
        }
    }

    /// A claim of this event came back short: it has no more due requests
    /// (until an announcement or a read says otherwise).
    pub fn drained(&self, event: i64) {
        self.lock().events.retain(|&e| e != event);
    }

    /// Whether any event is known to have due requests.
    pub fn is_empty(&self) -> bool {
        self.lock().events.is_empty()
    }

    fn due(&self) -> bool {
        let state = self.lock();
        match state.read_at {
            None => true,
            Some(at) if state.events.is_empty() => at.elapsed() >= EMPTY_REREAD,
            Some(at) => at.elapsed() >= REFRESH,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_served_in_turn_and_dropped_when_drained() {
        let agenda = Agenda::default();
        agenda.lock().read_at = Some(Instant::now());
        agenda.heard(1);
        agenda.heard(2);
        agenda.heard(2);
        let mut state = agenda.lock();
        assert_eq!(state.events, [2, 1]);
        let first = state.events.pop_front();
        state.events.extend(first);
        assert_eq!(state.events, [1, 2]);
        drop(state);
        agenda.drained(1);
        assert_eq!(agenda.lock().events, [2]);
        agenda.drained(2);
        assert!(agenda.is_empty());
    }
}
