//! The booking state machine against a model: random sequences of hold,
//! book, named seats, confirm, cancel, extend, expire and sweep run on the real
//! database and on a small in-memory model. After every step the outcome
//! (error code, seats granted) and every seat's state must agree, and the
//! invariants must hold.

mod common;

use common::{TestDb, code};
use proptest::prelude::*;
use seatq::{BookingRef, HoldExtension, Request, SeatRequest, Status};

/// 24 seats, six a row: class 1 = seats 1-19 (1-9 dearer), class 2 = 20-24.
const SEATS: usize = 24;

#[derive(Debug, Clone)]
enum Op {
    Take {
        hold: bool,
        class: i16,
        party: u32,
        customer: u8,
        partial: bool,
    },
    Named {
        hold: bool,
        seats: Vec<i32>,
        customer: u8,
    },
    Confirm {
        booking: usize,
        customer: u8,
    },
    Cancel {
        booking: usize,
        customer: u8,
    },
    Extend {
        booking: usize,
        customer: u8,
    },
    /// Move a hold's expiry into the past (time passing, without waiting).
    Expire {
        booking: usize,
    },
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 1i16..=2, 1u32..=5, 0u8..3, prop::bool::weighted(0.2))
            .prop_map(|(hold, class, party, customer, partial)| Op::Take { hold, class, party, customer, partial }),
        2 => (any::<bool>(), prop::collection::btree_set(1i32..=SEATS as i32, 1..=3), 0u8..3)
            .prop_map(|(hold, seats, customer)| Op::Named { hold, seats: seats.into_iter().collect(), customer }),
        2 => (any::<usize>(), 0u8..3).prop_map(|(booking, customer)| Op::Confirm { booking, customer }),
        1 => (any::<usize>(), 0u8..3).prop_map(|(booking, customer)| Op::Cancel { booking, customer }),
        1 => (any::<usize>(), 0u8..3).prop_map(|(booking, customer)| Op::Extend { booking, customer }),
        1 => any::<usize>().prop_map(|booking| Op::Expire { booking }),
        1 => Just(Op::Sweep),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BState {
    Held,
    Booked,
    Cancelled,
    Expired,
}

#[derive(Debug, Clone)]
struct Booking {
    id: i64,
    customer: u8,
    state: BState,
    lapsed: bool,
    seats: Vec<i32>,
}

/// The model: who owns each seat (index into `bookings`), and the bookings.
#[derive(Debug, Default)]
struct Model {
    owner: Vec<Option<usize>>,
    bookings: Vec<Booking>,
}

fn class_of(seat: i32) -> i16 {
    if seat <= 19 { 1 } else { 2 }
}

fn price_of(seat: i32) -> i32 {
    match seat {
        1..=9 => 90000,
        10..=19 => 75000,
        _ => 40000,
    }
}

impl Model {
    fn new() -> Model {
        Model { owner: vec![None; SEATS + 1], bookings: Vec::new() }
    }

    fn is_free(&self, seat: i32) -> bool {
        match self.owner[seat as usize] {
            None => true,
            Some(b) => self.bookings[b].state == BState::Held && self.bookings[b].lapsed,
        }
    }

    /// The state each seat shows in the database: available, held, lapsed, booked.
    fn seat_states(&self) -> Vec<String> {
        (1..=SEATS as i32)
            .map(|s| match self.owner[s as usize].map(|b| &self.bookings[b]) {
                None => "available".into(),
                Some(b) if b.state == BState::Booked => "booked".into(),
                Some(b) if b.lapsed => "lapsed".into(),
                Some(_) => "held".into(),
            })
            .collect()
    }

    fn grant(&mut self, id: i64, customer: u8, hold: bool, seats: Vec<i32>) {
        let index = self.bookings.len();
        for s in &seats {
            self.owner[*s as usize] = Some(index);
        }
        let state = if hold { BState::Held } else { BState::Booked };
        self.bookings.push(Booking { id, customer, state, lapsed: false, seats });
    }

    /// The expected outcome: Ok(seats) or Err(code).
    fn take(&self, class: i16, party: u32, partial: bool) -> Result<Vec<i32>, &'static str> {
        let mut free: Vec<i32> = (1..=SEATS as i32).filter(|s| class_of(*s) == class && self.is_free(*s)).collect();
        free.sort_by_key(|s| (price_of(*s), *s));
        if free.len() >= party as usize {
            free.truncate(party as usize);
        } else if !partial || free.is_empty() {
            return Err("sold_out");
        }
        free.sort_unstable();
        Ok(free)
    }

    fn named(&self, seats: &[i32]) -> Result<Vec<i32>, &'static str> {
        if seats.iter().all(|s| self.is_free(*s)) { Ok(seats.to_vec()) } else { Err("seats_taken") }
    }

    /// Confirm or cancel booking `b` for `customer`; the expected code.
    fn settle(&mut self, b: usize, customer: u8, confirm: bool) -> &'static str {
        let booking = &self.bookings[b];
        if booking.customer != customer {
            return "booking_not_found";
        }
        match (booking.state, confirm) {
            (BState::Expired, _) => return "hold_expired",
            (BState::Held, _) if booking.lapsed => return "hold_expired",
            (BState::Cancelled, true) => return "booking_cancelled",
            (BState::Cancelled, false) | (BState::Booked, true) => return "succeeded",
            _ => {}
        }
        if confirm {
            self.bookings[b].state = BState::Booked;
        } else {
            for s in self.bookings[b].seats.clone() {
                if self.owner[s as usize] == Some(b) {
                    self.owner[s as usize] = None;
                }
            }
            self.bookings[b].state = BState::Cancelled;
        }
        "succeeded"
    }

    /// Extend booking `b` for `customer`; the expected code. A live hold
    /// stays live (the model has no clock: only `Expire` lapses a hold).
    fn extend(&self, b: usize, customer: u8) -> &'static str {
        let booking = &self.bookings[b];
        if booking.customer != customer {
            return "booking_not_found";
        }
        match booking.state {
            BState::Expired => "hold_expired",
            BState::Held if booking.lapsed => "hold_expired",
            BState::Cancelled => "booking_cancelled",
            BState::Booked => "not_held",
            BState::Held => "succeeded",
        }
    }

    fn sweep(&mut self) {
        for b in 0..self.bookings.len() {
            if self.bookings[b].state == BState::Held && self.bookings[b].lapsed {
                self.bookings[b].state = BState::Expired;
                for s in 1..=SEATS {
                    if self.owner[s] == Some(b) {
                        self.owner[s] = None;
                    }
                }
            }
        }
    }
}

fn customer(c: u8) -> String {
    format!("c{c}")
}

async fn db_seat_states(db: &TestDb, event: i64) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT CASE WHEN state = 'held' AND held_until <= now() THEN 'lapsed' ELSE state::text END
         FROM seatq.seats WHERE event_id = $1 ORDER BY seat_no",
    )
    .bind(event)
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

async fn run_ops(ops: Vec<Op>) {
    let db = TestDb::new().await;
    let event = db.client.add_event("Model", SEATS as i32, 6).await.unwrap();
    let mut model = Model::new();
    for (step, op) in ops.iter().enumerate() {
        let pick = |i: usize| (!model.bookings.is_empty()).then(|| i % model.bookings.len());
        match op {
            Op::Take { hold, class, party, customer: c, partial } => {
                let mut r = SeatRequest::new(event, *class, *party, customer(*c));
                r.partial = *partial;
                let expected = model.take(*class, *party, *partial);
                let done = db.run(if *hold { Request::Hold(r) } else { Request::Book(r) }).await;
                check_take(&mut model, &done, expected, *c, *hold, step, op);
            }
            Op::Named { hold, seats, customer: c } => {
                let r = SeatRequest::named(event, seats.clone(), customer(*c));
                let expected = model.named(seats);
                let done = db.run(if *hold { Request::Hold(r) } else { Request::Book(r) }).await;
                check_take(&mut model, &done, expected, *c, *hold, step, op);
            }
            Op::Confirm { booking, customer: c } | Op::Cancel { booking, customer: c } => {
                let confirm = matches!(op, Op::Confirm { .. });
                let (id, expected) = match pick(*booking) {
                    Some(b) => (model.bookings[b].id, model.settle(b, *c, confirm)),
                    None => (i64::MAX, "booking_not_found"),
                };
                let r = BookingRef { event: None, booking: id, customer: customer(*c), token: None };
                let done = db.run(if confirm { Request::Confirm(r) } else { Request::Cancel(r) }).await;
                assert_eq!(code(&done), expected, "step {step} {op:?}: {done:?}");
            }
            Op::Extend { booking, customer: c } => {
                let (id, expected) = match pick(*booking) {
                    Some(b) => (model.bookings[b].id, model.extend(b, *c)),
                    None => (i64::MAX, "booking_not_found"),
                };
                let r =
                    HoldExtension { event: None, booking: id, customer: customer(*c), hold_seconds: None, token: None };
                let done = db.run(Request::Extend(r)).await;
                assert_eq!(code(&done), expected, "step {step} {op:?}: {done:?}");
            }
            Op::Expire { booking } => {
                if let Some(b) = pick(*booking).filter(|b| model.bookings[*b].state == BState::Held) {
                    model.bookings[b].lapsed = true;
                    let id = model.bookings[b].id;
                    db.lapse_hold(id).await;
                }
            }
            Op::Sweep => {
                seatq_worker::sweeper::sweep(&db.pool).await.unwrap();
                model.sweep();
            }
        }
        assert_eq!(db_seat_states(&db, event).await, model.seat_states(), "seats after step {step} {op:?}");
        db.assert_invariants(true).await;
    }
    db.close().await;
}

fn check_take(
    model: &mut Model,
    done: &seatq::RequestRecord,
    expected: Result<Vec<i32>, &'static str>,
    c: u8,
    hold: bool,
    step: usize,
    op: &Op,
) {
    match expected {
        Ok(seats) => {
            assert_eq!(done.status, Status::Succeeded, "step {step} {op:?}: {done:?}");
            let b = done.booking().unwrap();
            let got: Vec<i32> = b.seats.iter().map(|s| s.seat).collect();
            assert_eq!(got, seats, "step {step} {op:?}: seats");
            model.grant(b.booking, c, hold, seats);
        }
        Err(expected) => assert_eq!(code(done), expected, "step {step} {op:?}: {done:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_database_behaves_like_the_model(ops in prop::collection::vec(op(), 1..30)) {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run_ops(ops));
    }
}
