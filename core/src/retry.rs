//! Retry timing: jittered exponential backoff. The `backoff` crate is
//! unmaintained (RUSTSEC-2025-0012), so it is used only here, behind this
//! small interface, to be swapped without touching the rest.

use std::time::Duration;

use backoff::ExponentialBackoff;
use backoff::backoff::Backoff as _;

/// A sequence of growing, randomised delays.
pub struct Jitter(ExponentialBackoff);

impl Jitter {
    /// Delays start near `initial`, double each time (±50% jitter) and stop
    /// growing at `max`.
    pub fn new(initial: Duration, max: Duration) -> Jitter {
        Jitter(ExponentialBackoff {
            initial_interval: initial,
            current_interval: initial,
            randomization_factor: 0.5,
            multiplier: 2.0,
            max_interval: max,
            max_elapsed_time: None,
            ..ExponentialBackoff::default()
        })
    }

    /// Between contention retries: short, because locks are held for milliseconds.
    pub fn contention() -> Jitter {
        Jitter::new(Duration::from_millis(2), Duration::from_millis(100))
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        // With max_elapsed_time unset the sequence never ends.
        self.0.next_backoff().unwrap_or(self.0.max_interval)
    }

    /// The `n`th delay (n from 0) of a sequence, without keeping state: for
    /// requests put back in the queue, whose retry count lives in the row.
    pub fn nth(initial: Duration, max: Duration, n: u32) -> Duration {
        let mut jitter = Jitter::new(initial, max);
        (0..n.min(32)).for_each(|_| {
            jitter.next_delay();
        });
        jitter.next_delay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_is_capped() {
        let max = Duration::from_millis(100);
        let mut j = Jitter::new(Duration::from_millis(2), max);
        let delays: Vec<Duration> = (0..20).map(|_| j.next_delay()).collect();
        assert!(delays[0] <= Duration::from_millis(3), "{delays:?}");
        assert!(delays.iter().all(|d| *d <= max + max / 2), "{delays:?}");
        assert!(delays[19] >= max / 2, "{delays:?}");
    }
}
