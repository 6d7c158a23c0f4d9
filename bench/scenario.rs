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
/// The on-sale: small events, far more demand than seats.
const ONSALE_EVENTS: usize = 20;
const ONSALE_SEATS: i32 = 200;
/// Of the on-sale's events, the first ones get requests for named seats,
/// all in their front rows, so that they collide.
const ONSALE_NAMED_EVENTS: usize = 3;
const ONSALE_NAMED_FROM: i32 = 36;
/// The line scenario's one event.
const LINE_SEATS: i32 = 2_000;
/// How long the line scenario's requests wait for seats, at most.
const LINE_WAIT_SECS: u32 = 3_600;

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
    /// The mix of a real on-sale: 20 events of 200 seats and 100 times
    /// more requests than seats would sell out several times over; holds
    /// and books, named seats colliding on three events, `together` and
    /// `partial` parties. Most requests end refused (`sold_out`,
    /// `seats_taken`, `no_adjacent_seats`), which must cost no more than a
    /// booking.
    OnSale,
    /// The line at an opening: one event of 2,000 seats that 20,000
    /// requests, every one asking to wait (`wait_seconds`), want at once;
    /// most join its waiting list. The holds are then confirmed, cancelled
    /// or left to lapse, as at a checkout, and the seats that come back are
    /// handed over to the list.
    OnSaleLine,
}

pub const ALL: [Scenario; 6] =
    [Scenario::Spread, Scenario::Hot, Scenario::Checkout, Scenario::Deep, Scenario::OnSale, Scenario::OnSaleLine];

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
            Scenario::OnSale => "on-sale",
            Scenario::OnSaleLine => "onsale-line",
        }
    }

    pub fn defaults(self) -> Defaults {
        match self {
            Scenario::Spread | Scenario::Deep => Defaults { requests: 60_000, workers: 1, concurrency: 4 },
            // Demand a little above supply: 5,000 parties of 4.5 on average
            // for 20,000 seats; 32 batch loops fight over it.
            Scenario::Hot => Defaults { requests: 5_000, workers: 1, concurrency: 32 },
            Scenario::Checkout => Defaults { requests: 40_000, workers: 1, concurrency: 4 },
            Scenario::OnSale | Scenario::OnSaleLine => Defaults { requests: 20_000, workers: 1, concurrency: 4 },
        }
    }

    /// Events to create: (names, seats each), with `flights` flights where
    /// the scenario has flights.
    pub fn inventory(self, flights: usize) -> (Vec<String>, i32) {
        match self {
            Scenario::Hot => (vec!["Hot venue".to_string()], VENUE_SEATS),
            Scenario::OnSale => ((1..=ONSALE_EVENTS).map(|n| format!("On-sale {n}")).collect(), ONSALE_SEATS),
            Scenario::OnSaleLine => (vec!["On-sale line".to_string()], LINE_SEATS),
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
            Scenario::OnSale => {
                let at = rng.usize(..events.len());
                let mut p = json!({"event": events[at], "customer": customer});
                if at < ONSALE_NAMED_EVENTS && rng.bool() {
                    let first = rng.i32(1..=ONSALE_NAMED_FROM);
                    p["seats"] = json!((first..first + rng.i32(1..=4)).collect::<Vec<_>>());
                } else {
                    p["class"] = json!(class_of(rng));
                    match rng.u32(0..20) {
                        0..=4 => {
                            p["party"] = json!(rng.u32(2..=6));
                            p["together"] = json!(true);
                        }
                        5..=7 => {
                            p["party"] = json!(rng.u32(2..=6));
                            p["partial"] = json!(true);
                        }
                        _ => p["party"] = json!(rng.u32(1..=4)),
                    }
                }
                if rng.bool() {
                    p["hold_seconds"] = json!(hold_secs);
                    ("hold", p)
                } else {
                    ("book", p)
                }
            }
            Scenario::OnSaleLine => {
                let p = json!({"event": events[0], "class": class_of(rng), "party": rng.u32(1..=4),
                               "customer": customer, "hold_seconds": hold_secs, "wait_seconds": LINE_WAIT_SECS});
                ("hold", p)
            }
            Scenario::Spread | Scenario::Deep | Scenario::Checkout => {
                let event = events[rng.usize(..events.len())];
                let class = class_of(rng);
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
        ALL.into_iter().find(|sc| sc.name() == s).ok_or_else(|| {
            format!("unknown scenario {s:?}: expected spread, hot, checkout, deep, on-sale, onsale-line or all")
        })
    }
}

/// A class in proportion to the seats of the classic layout: 1 in 10
/// requests for class 1, 2 in 10 for class 2, the rest class 3.
fn class_of(rng: &mut fastrand::Rng) -> i16 {
    match rng.u32(0..10) {
        0 => 1,
        1 | 2 => 2,
        _ => 3,
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
