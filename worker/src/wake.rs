//! Waking a process's batch loops, and knowing when not to claim.
//!
//! A new request wakes one idle loop; a claim that comes back full wakes the
//! next. A loop whose claim was full goes straight on to claim again, unless
//! a claim begun since came back short and nothing new has arrived after that
//! one began: then the queue held nothing claimable at that claim's snapshot,
//! and a claim now would only step over the requests other batches hold (a
//! lock-manager call each) to find nothing. A batch that fails releases its
//! requests without a notification, so its loop calls [`Wake::released`].
//! What becomes claimable otherwise is found by the fallback poll, as when
//! every loop is idle (a retry or requeued request falling due), or by the
//! rescue (`crate::rescue`: requests released by a worker of another process
//! that died, taken over as it dies).

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// Shared by a process's batch loops and its listener.
#[derive(Debug, Default)]
pub struct Wake {
    notify: Notify,
    /// Orders claims and notifications: each takes the next ticket.
    tickets: AtomicU64,
    /// Ticket of the latest claim that came back short.
    short: AtomicU64,
    /// Ticket of the latest notification of new requests.
    news: AtomicU64,
    /// The database answers again (the listener reconnected): loops pausing
    /// after failed batches go at once, their backoff started over. Counted,
    /// so that a loop busy when it happened sees it before its next pause.
    back: Notify,
    backs: AtomicU64,
}

impl Wake {
    /// A ticket for a claim about to begin.
    pub fn ticket(&self) -> u64 {
        self.tickets.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// New requests: wake one idle loop.
    pub fn news(&self) {
        self.released();
        self.notify.notify_one();
    }

    /// Notifications may have been missed (the listener reconnected): wake
    /// every idle loop.
    pub fn everyone(&self) {
        self.released();
        self.notify.notify_waiters();
    }

    /// Requests may be claimable that no claim begun before now saw: loops
    /// still busy claim again after their batch. Idle ones are not woken: a
    /// failed batch, which released its requests unannounced, calls this
    /// alone, so that a request that breaks batches does not break all of
    /// them at once.
    pub fn released(&self) {
        self.news.fetch_max(self.ticket(), Ordering::SeqCst);
    }

    /// A claim came back full: wake the next idle loop, since more are likely
    /// due.
    pub fn next(&self) {
        self.notify.notify_one();
    }

    /// The claim with this ticket came back short.
    pub fn claimed_short(&self, ticket: u64) {
        self.short.fetch_max(ticket, Ordering::SeqCst);
    }

    /// Has a claim begun after the one with this ticket come back short, with
    /// no news since it began? Then claiming again now would find nothing.
    pub fn drained_since(&self, ticket: u64) -> bool {
        let short = self.short.load(Ordering::SeqCst);
        short > ticket && self.news.load(Ordering::SeqCst) < short
    }

    /// The listener reached the database again after losing it.
    pub fn database_back(&self) {
        self.backs.fetch_add(1, Ordering::SeqCst);
        self.back.notify_waiters();
    }

    /// How many times the database came back: read before an attempt, and
    /// given to [`Wake::until_back`] after it fails.
    pub fn backs(&self) -> u64 {
        self.backs.load(Ordering::SeqCst)
    }

    /// Wait until the database is back after `seen` ([`Wake::backs`]): at
    /// once if it came back since.
    pub async fn until_back(&self, seen: u64) {
        let notified = self.back.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.backs() != seen {
            return;
        }
        notified.await
    }

    /// Wait to be woken.
    pub async fn notified(&self) {
        self.notify.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_short_claim_means_drained_until_news() {
        let wake = Wake::default();
        let mine = wake.ticket();
        assert!(!wake.drained_since(mine), "no other claim yet");
        let other = wake.ticket();
        wake.claimed_short(other);
        assert!(wake.drained_since(mine), "a claim after mine found the queue empty");
        wake.news();
        assert!(!wake.drained_since(mine), "new requests since");
        let last = wake.ticket();
        wake.claimed_short(last);
        assert!(wake.drained_since(mine), "and a later short claim took them");
    }

    #[test]
    fn a_short_claim_before_mine_says_nothing() {
        let wake = Wake::default();
        let earlier = wake.ticket();
        let mine = wake.ticket();
        wake.claimed_short(earlier);
        assert!(!wake.drained_since(mine));
    }

    #[test]
    fn missed_notifications_and_released_requests_count_as_news() {
        for unannounced in [Wake::everyone, Wake::released] {
            let wake = Wake::default();
            let mine = wake.ticket();
            let other = wake.ticket();
            wake.claimed_short(other);
            unannounced(&wake);
            assert!(!wake.drained_since(mine));
        }
    }
}
