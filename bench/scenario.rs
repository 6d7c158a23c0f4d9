//! The benchmark's scenarios: what inventory they seed, what was in the queue
//! before, and what requests arrive.

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

/// Flights of the classic example (scenarios spread, checkout and deep),
/// unless `--flights` says otherwise.
pub const FLIGHTS: usize = 3_000;
const FLIGHT_SEATS: i32 = 250;
/// The hot venue.
const VENUE_SEATS: i32 = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// 3,000 flights of 250 seats, parties of 1 to 4 spread over all of them.
    Spread,
    /// One 20,000-seat venue that every request wants, parties of 1 to 8.
    Hot,
    /// Holds, then confirm (70%), cancel (20%) or walk away (10%).
    Checkout,
    /// Spread, with a million finished and 100,000 queued requests already
    /// in the table.
    Deep,
}

pub const ALL: [Scenario; 4] = [Scenario::Spread, Scenario::Hot, Scenario::Checkout, Scenario::Deep];

/// How a scenario runs unless the command line says otherwise.
pub struct Defaults {
    /// Requests enqueued in the measured burst.
    pub requests: usize,
    /// Worker processes.
    pub workers: usize,
    /// Batch loops per worker process.
    pub concurrency: usize,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Spread => "spread",
            Scenario::Hot => "hot",
            Scenario::Checkout => "checkout",
            Scenario::Deep => "deep",
        }
    }

    pub fn defaults(self) -> Defaults {
        match self {
            Scenario::Spread | Scenario::Deep => Defaults { requests: 60_000, workers: 1, concurrency: 4 },
            // Demand a little above supply: 5,000 parties of 4.5 on average
            // for 20,000 seats; 32 batch loops fight over it.
            Scenario::Hot => Defaults { requests: 5_000, workers: 1, concurrency: 32 },
            Scenario::Checkout => Defaults { requests: 40_000, workers: 1, concurrency: 4 },
        }
    }

    /// Events to create: (names, seats each), with `flights` flights where
    /// the scenario has flights.
    pub fn inventory(self, flights: usize) -> (Vec<String>, i32) {
        match self {
            Scenario::Hot => (vec!["Hot venue".to_string()], VENUE_SEATS),
            _ => ((1..=flights.max(1)).map(|n| format!("Flight {n}")).collect(), FLIGHT_SEATS),
        }
    }

    /// Finished and queued requests already in the table before the run.
    pub fn backlog(self, scale: f64) -> (i64, usize) {
        match self {
            Scenario::Deep => ((1_000_000.0 * scale).round() as i64, (100_000.0 * scale).round() as usize),
            _ => (0, 0),
        }
    }

    /// The `n`th request of the burst: (kind, payload). `events` are the
    /// seeded event ids.
    pub fn request(self, rng: &mut fastrand::Rng, events: &[i64], n: usize, hold_secs: u32) -> (&'static str, Value) {
        let customer = format!("c{n}");
        match self {
            Scenario::Hot => {
                // Classes in proportion to their seats (19, 30 and the rest).
                let seat = rng.i32(1..=VENUE_SEATS);
                let class = if seat <= 19 {
                    1
                } else if seat <= 49 {
                    2
                } else {
                    3
                };
                ("book", json!({"event": events[0], "class": class, "party": rng.u32(1..=8), "customer": customer}))
            }
            Scenario::Spread | Scenario::Deep | Scenario::Checkout => {
                let event = events[rng.usize(..events.len())];
                let class = match rng.u32(0..10) {
                    0 => 1,
                    1 | 2 => 2,
                    _ => 3,
                };
                let party = rng.u32(1..=4);
                if self == Scenario::Checkout {
                    let p = json!({"event": event, "class": class, "party": party, "customer": customer,
                                   "hold_seconds": hold_secs});
                    ("hold", p)
                } else {
                    ("book", json!({"event": event, "class": class, "party": party, "customer": customer}))
                }
            }
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL.into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| format!("unknown scenario {s:?}: expected spread, hot, checkout, deep or all"))
    }
}

/// What a checkout customer does after the hold: confirm (70%), cancel
/// (20%), or nothing (10%, left to expire).
pub fn follow_up(rng: &mut fastrand::Rng) -> Option<&'static str> {
    match rng.u32(0..10) {
        0..=6 => Some("confirm"),
        7 | 8 => Some("cancel"),
        _ => None,
    }
}
