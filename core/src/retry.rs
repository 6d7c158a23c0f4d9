//! Retry timing: jittered exponential backoff, the one source of retry
//! delays for the client, the worker and the benchmark. The `backoff` crate
//! is unmaintained (RUSTSEC-2025-0012), so it is used only here, behind this
//! small interface, to be swapped without touching the rest.
//!
//! The schedules seatq uses are named here, so that each is written once:
//! [`Jitter::contention`], [`Jitter::failed_batch`] and
//! [`Jitter::failed_request`].

use std::time::Duration;

use backoff::ExponentialBackoff;
use backoff::backoff::Backoff as _;

/// A sequence of growing, randomised delays.
#[derive(Debug)]
pub struct Jitter(ExponentialBackoff);

impl Jitter {
    /// Delays start near `initial`, double each time (±50% jitter: half to
    /// one and a half times the nominal delay) and stop growing at `max`.
    pub fn new(initial: Duration, max: Duration) -> Jitter {
        Jitter::spread(initial, max, 0.5)
    }

    /// Delays of nominal length `first`, doubling each time up to `max`,
    /// each drawn from half to all of its nominal length: never longer than
    /// nominal, for a caller that bounds the total time it waits.
    pub fn at_most(first: Duration, max: Duration) -> Jitter {
        // Half to all of d is three quarters of d, ±1/3.
        Jitter::spread(first.mul_f64(0.75), max.mul_f64(0.75), 1.0 / 3.0)
    }

    fn spread(initial: Duration, max: Duration, randomization_factor: f64) -> Jitter {
        Jitter(ExponentialBackoff {
            initial_interval: initial,
            current_interval: initial,
            randomization_factor,
            multiplier: 2.0,
            max_interval: max,
            max_elapsed_time: None,
            ..ExponentialBackoff::default()
        })
    }

    /// Between contention retries: short, because locks are held for
    /// milliseconds (2 ms doubling to 100 ms).
    pub fn contention() -> Jitter {
        Jitter::new(Duration::from_millis(2), Duration::from_millis(100))
    }

    /// Between batches that failed one after another (100 ms doubling to 10 s).
    pub fn failed_batch() -> Jitter {
        Jitter::new(Duration::from_millis(100), Duration::from_secs(10))
    }

    /// Between attempts to reach the database again after losing it: the
    /// listener's reconnects and the heartbeat's (100 ms doubling to 10 s).
    pub fn reconnect() -> Jitter {
        Jitter::new(Duration::from_millis(100), Duration::from_secs(10))
    }

    /// Between attempts to listen again after losing the connection, where
    /// the listener's return is what tells others the database is back
    /// (100 ms doubling to 1 s: one connection attempt a second at most).
    pub fn watch() -> Jitter {
        Jitter::new(Duration::from_millis(100), Duration::from_secs(1))
    }

    /// Between attempts to connect at start (250 ms doubling to 5 s): a
    /// worker started before its database keeps trying, briefly apart.
    pub fn starting() -> Jitter {
        Jitter::new(Duration::from_millis(250), Duration::from_secs(5))
    }

    /// How long a request that failed unexpectedly waits in the queue before
    /// its next attempt, after `attempts` failed attempts (1 s doubling to
    /// 60 s). Its attempts are counted in its row, so this keeps no state.
    pub fn failed_request(attempts: u32) -> Duration {
        Jitter::nth(Duration::from_secs(1), Duration::from_secs(60), attempts)
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        // With max_elapsed_time unset the sequence never ends.
        self.0.next_backoff().unwrap_or(self.0.max_interval)
    }

    /// From the first delay again.
    pub fn reset(&mut self) {
        self.0.reset();
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
        j.reset();
        assert!(j.next_delay() <= Duration::from_millis(3), "from the start again");
    }

    #[test]
    fn at_most_is_half_to_all_of_the_nominal_delay() {
        let (first, max) = (Duration::from_millis(100), Duration::from_secs(5));
        for _ in 0..50 {
            let mut j = Jitter::at_most(first, max);
            let mut nominal = first;
            for _ in 0..12 {
                let d = j.next_delay();
                // A nanosecond of rounding either way.
                let (low, high) = (nominal / 2, nominal + Duration::from_nanos(2));
                assert!(d + Duration::from_nanos(2) >= low && d <= high, "{d:?} for nominal {nominal:?}");
                nominal = (nominal * 2).min(max);
            }
        }
    }
}
