//! The line and the waiting list (docs/design.md "The line and the waiting
//! list"): a request that asks to wait joins its event's waiting list when
//! sold out, seats freed go to the list in the transaction that frees them,
//! in the event's order, never to the public while parties wait; waits end
//! `sold_out`; and line requests are served in arrival order by any number
//! of workers.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::Utc;
use common::{Running, TestDb, code, eventually, hold};
use seatq::{BookingRef, EventChanges, NewRequest, PlaceList, Request, RequestRecord, Status, WaitlistOrder};
use seatq_worker::{Config, sweeper};

/// A hold of `party` seats of class 1 that waits up to `secs` seconds.
fn waiting(event: i64, party: u32, customer: &str, secs: u32) -> Request {
    let mut r = hold(event, 1, party, customer);
    r.wait_seconds = Some(secs);
    Request::Hold(r)
}

async fn enqueue(db: &TestDb, request: Request) -> i64 {
    db.client.enqueue(NewRequest::from(request)).await.expect("enqueue")
}

fn cancel(booking: i64, customer: &str) -> Request {
    Request::Cancel(BookingRef { event: None, booking, customer: customer.into(), token: None })
}

/// A held party's booking id.
fn booking(r: &RequestRecord) -> i64 {
    r.booking().unwrap_or_else(|| panic!("no booking: {r:?}")).booking
}

/// A fresh database with an event of `seats` seats, `per_row` a row, all
/// of class 1 at one price (so that cheapest first is seat order).
async fn with_event(name: &str, seats: i32, per_row: i32) -> (TestDb, i64) {
    let (db, ev) = TestDb::with_event(name, seats, per_row).await;
    sqlx::query("UPDATE seatq.seats SET class = 1, price_cents = 2500 WHERE event_id = $1")
        .bind(ev)
        .execute(&db.pool)
        .await
        .expect("one class");
    (db, ev)
}

/// Sell every seat of a `seats`-seat event out to holds of one seat each
/// (customers h0, h1, ...), returning their bookings.
async fn sell_out(db: &TestDb, event: i64, seats: usize) -> Vec<i64> {
    let mut held = Vec::new();
    for k in 0..seats {
        held.push(booking(&db.run(Request::Hold(hold(event, 1, 1, &format!("h{k}")))).await));
    }
    held
}

#[tokio::test]
async fn a_sold_out_party_waits_and_a_cancel_hands_it_the_seats() {
    let (db, ev) = with_event("Four seats", 4, 4).await;
    let held = sell_out(&db, ev, 4).await;

    let ann = enqueue(&db, waiting(ev, 2, "ann", 600)).await;
    db.drain().await;
    let r = db.client.status(ann).await.unwrap();
    assert_eq!(r.status, Status::Waiting, "{r:?}");
    let place = r.place.expect("a place");
    assert_eq!((place.list, place.parties_ahead, place.seats_ahead), (PlaceList::Waiting, 0, Some(0)));
    let bob = enqueue(&db, waiting(ev, 1, "bob", 600)).await;
    db.drain().await;
    let place = db.client.status(bob).await.unwrap().place.expect("a place");
    assert_eq!((place.parties_ahead, place.seats_ahead), (1, Some(2)), "behind ann's party of 2");

    // One seat free: ann's party of 2 does not fit; bob's of 1 does (first
    // that fits, while ann has not been passed over for 2 seats).
    assert_eq!(code(&db.run(cancel(held[0], "h0")).await), "succeeded");
    assert_eq!(db.client.status(ann).await.unwrap().status, Status::Waiting);
    let bob_r = db.client.status(bob).await.unwrap();
    let bob_seats = bob_r.booking().expect("bob served").seats;
    assert_eq!(bob_seats.iter().map(|s| s.seat).collect::<Vec<_>>(), [1], "the seat freed");

    // A second: still one free for ann's two; a third makes two.
    db.run(cancel(held[1], "h1")).await;
    assert_eq!(db.client.status(ann).await.unwrap().status, Status::Waiting);
    assert_eq!(db.seat_states(ev, [2]).await, ["available"], "owed to ann, not given to anyone");
    // Not to the public while ann waits: a request that does not wait is
    // sold out, and the seat by number is taken.
    let public = db.run(Request::Hold(hold(ev, 1, 1, "cat"))).await;
    assert_eq!(code(&public), "sold_out", "{public:?}");
    assert!(public.error_message.as_deref().unwrap_or_default().contains("waiting"), "{public:?}");
    let named = db.run(Request::Hold(seatq::SeatRequest::named(ev, vec![2], "dan"))).await;
    assert_eq!(code(&named), "seats_taken", "{named:?}");

    db.run(cancel(held[2], "h2")).await;
    let ann_r = db.client.status(ann).await.unwrap();
    let handed = ann_r.booking().unwrap_or_else(|| panic!("ann served: {ann_r:?}"));
    assert_eq!(handed.seats.iter().map(|s| s.seat).collect::<Vec<_>>(), [2, 3]);
    let window = handed.held_until.expect("a hold") - Utc::now();
    assert!(window > chrono::Duration::seconds(590), "a fresh window: {window}");

    // The list is empty: the public may have seats again.
    db.run(cancel(held[3], "h3")).await;
    assert_eq!(code(&db.run(Request::Hold(hold(ev, 1, 1, "cat"))).await), "succeeded");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_party_that_cannot_wait_is_refused_as_before_and_a_wait_that_ends_is_sold_out() {
    let (db, ev) = with_event("Two seats", 2, 2).await;
    sell_out(&db, ev, 2).await;
    assert_eq!(code(&db.run(Request::Hold(hold(ev, 1, 1, "eve"))).await), "sold_out");
    let short = enqueue(&db, waiting(ev, 1, "fay", 1)).await;
    db.drain().await;
    assert_eq!(db.client.status(short).await.unwrap().status, Status::Waiting);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let swept = sweeper::sweep(&db.pool).await.expect("sweep");
    assert_eq!(swept.waiting, 1, "{swept:?}");
    let r = db.client.status(short).await.unwrap();
    assert_eq!((r.status, code(&r)), (Status::Failed, "sold_out"), "{r:?}");
    assert!(r.error_message.as_deref().unwrap_or_default().contains("wait ended"), "{r:?}");
    let list = db.client.waiting_list(ev).await.unwrap().expect("event");
    assert_eq!((list.waiting, list.seats_wanted), (0, 0));
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_closed_list_tells_its_parties_and_takes_no_more() {
    let (db, ev) = with_event("One seat", 1, 1).await;
    sell_out(&db, ev, 1).await;
    let gus = enqueue(&db, waiting(ev, 1, "gus", 600)).await;
    db.drain().await;
    let list = db.client.waiting_list(ev).await.unwrap().expect("event");
    assert_eq!((list.waiting, list.seats_wanted, list.order), (1, 1, WaitlistOrder::Bounded));
    assert!(list.oldest.is_some());
    assert!(db.client.close_waiting_list(ev).await.unwrap());
    let r = db.client.status(gus).await.unwrap();
    assert_eq!(code(&r), "sold_out");
    assert!(r.error_message.as_deref().unwrap_or_default().contains("closed"), "{r:?}");
    let late = db.run(waiting(ev, 1, "hal", 600)).await;
    assert_eq!(code(&late), "sold_out", "{late:?}");
    assert!(late.error_message.as_deref().unwrap_or_default().contains("closed"), "{late:?}");
    assert!(!db.client.close_waiting_list(ev + 1000).await.unwrap(), "no such event");
    db.assert_invariants_and_close().await;
}

/// The parties served, in the order of the seats freed one at a time, for a
/// list of a party of 2 then three of 1, under each order.
async fn served_in_order(order: WaitlistOrder) -> Vec<String> {
    let (db, ev) = with_event("Four seats", 4, 4).await;
    assert!(db.client.set_waitlist_order(ev, order).await.unwrap());
    let held = sell_out(&db, ev, 4).await;
    let mut ids = HashMap::new();
    for (name, party) in [("p2", 2), ("a1", 1), ("b1", 1), ("c1", 1)] {
        ids.insert(enqueue(&db, waiting(ev, party, name, 600)).await, name);
        db.drain().await;
    }
    let mut served = Vec::new();
    let mut seen = HashSet::new();
    for (k, b) in held.iter().enumerate() {
        db.run(cancel(*b, &format!("h{k}"))).await;
        let mut now: Vec<&str> = Vec::new();
        for (id, name) in &ids {
            if !seen.contains(id) && db.client.status(*id).await.unwrap().status == Status::Succeeded {
                seen.insert(*id);
                now.push(name);
            }
        }
        now.sort();
        served.push(now.join("+"));
    }
    db.assert_invariants_and_close().await;
    served
}

#[tokio::test]
async fn each_order_serves_the_list_as_documented() {
    // Strict: the party of 2 first, whatever comes free.
    assert_eq!(served_in_order(WaitlistOrder::Strict).await, ["", "p2", "a1", "b1"]);
    // First fit: whoever fits; the party of 2 waits for two seats at once.
    assert_eq!(served_in_order(WaitlistOrder::FirstFit).await, ["a1", "b1", "c1", ""]);
    // Bounded: first fit until 2 seats went past the party of 2, then it
    // comes first.
    assert_eq!(served_in_order(WaitlistOrder::Bounded).await, ["a1", "b1", "", "p2"]);
}

/// 200 parties wait on a sold-out event served in strict order while
/// bookings are cancelled and holds lapse at random under running workers:
/// every seat freed goes to the list in order, no party is served twice or
/// in part, no request that did not wait gets a seat, and waits end
/// `sold_out`.
#[tokio::test]
async fn two_hundred_parties_wait_while_seats_come_and_go() {
    const SEATS: usize = 60;
    let (db, ev) = with_event("Hot show", SEATS as i32, 10).await;
    assert!(db.client.set_waitlist_order(ev, WaitlistOrder::Strict).await.unwrap());
    let held = sell_out(&db, ev, SEATS).await;
    let config = Config { sweep_interval: Duration::from_millis(100), ..Config::default() };
    let running = Running::start(&db, 2, config).await;

    let mut rng = fastrand::Rng::with_seed(32);
    let mut parties = Vec::new();
    for k in 0..200 {
        let party = rng.u32(1..=3);
        // One in five gives up after 2 seconds.
        let secs = if k % 5 == 4 { 2 } else { 600 };
        let id = enqueue(&db, waiting(ev, party, &format!("w{k}"), secs)).await;
        parties.push((id, party, secs));
    }
    assert!(
        eventually(Duration::from_secs(30), || async {
            db.client.waiting_list(ev).await.unwrap().is_some_and(|l| l.in_line == 0 && l.waiting == 200)
        })
        .await,
        "every party joined the list"
    );
    // Seats come free: cancels, lapses (swept), and the public asks too.
    let mut public = Vec::new();
    for (k, b) in held.iter().enumerate() {
        if rng.bool() {
            enqueue(&db, cancel(*b, &format!("h{k}"))).await;
        } else {
            db.lapse_hold(*b).await;
        }
        if k % 4 == 0 {
            public.push(enqueue(&db, Request::Hold(hold(ev, 1, 1, &format!("p{k}")))).await);
        }
    }
    assert!(
        eventually(Duration::from_secs(30), || async {
            let left: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM seatq.seats WHERE event_id = $1 AND state = 'held' AND held_until < now()",
            )
            .bind(ev)
            .fetch_one(&db.pool)
            .await
            .unwrap();
            left == 0 && db.client.waiting_list(ev).await.unwrap().is_some_and(|l| l.in_line == 0)
        })
        .await,
        "every lapsed hold swept"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    running.stop().await;
    sweeper::sweep(&db.pool).await.expect("a last sweep");
    db.drain().await;

    for id in public {
        let r = db.client.status(id).await.unwrap();
        assert_eq!(code(&r), "sold_out", "a request that did not wait got no seat: {r:?}");
    }
    let mut served_seats = 0;
    let mut first_waiting: Option<usize> = None;
    for (k, (id, party, secs)) in parties.iter().enumerate() {
        let r = db.client.status(*id).await.unwrap();
        match r.status {
            Status::Succeeded => {
                assert!(first_waiting.is_none(), "party {k} served after party {first_waiting:?} still waits (strict)");
                let b = r.booking().expect("booking");
                assert_eq!(b.seats.len() as u32, *party, "all its seats, not part: {r:?}");
                served_seats += b.seats.len();
            }
            Status::Failed => {
                assert_eq!((code(&r), *secs), ("sold_out", 2), "only a wait that ended fails: {r:?}");
            }
            Status::Waiting => {
                first_waiting.get_or_insert(k);
            }
            other => panic!("party {k} is {other}: {r:?}"),
        }
    }
    let bookings: i64 =
        sqlx::query_scalar("SELECT count(*) FROM seatq.bookings b WHERE b.event_id = $1 AND b.request_id = ANY($2)")
            .bind(ev)
            .bind(parties.iter().map(|p| p.0).collect::<Vec<_>>())
            .fetch_one(&db.pool)
            .await
            .unwrap();
    let succeeded = db
        .records(&parties.iter().map(|p| p.0).collect::<Vec<_>>())
        .await
        .iter()
        .filter(|r| r.status == Status::Succeeded)
        .count();
    assert_eq!(bookings as usize, succeeded, "one booking per party served, none twice");
    // Every seat freed went to the list: what the list holds, and what it
    // is owed (fewer than its head wants), are every seat.
    let available = db.seat_states(ev, 1..=SEATS as i32).await.iter().filter(|s| *s == "available").count();
    assert_eq!(served_seats + available, SEATS, "every freed seat is the list's");
    if let Some(k) = first_waiting {
        assert!((available as u32) < parties[k].1, "the head (party {k}) does not fit in the {available} owed seats");
    }
    assert!(served_seats > 0, "some parties were served");
    db.assert_invariants_and_close().await;
}

/// Requests that ask to wait, enqueued before the sales open, are served in
/// arrival order when they open, whatever worker claims them; before, each
/// sees its place in line.
#[tokio::test]
async fn the_line_at_the_opening_is_served_in_arrival_order() {
    const SEATS: usize = 200;
    const LINE: usize = 600;
    let (db, ev) = with_event("Opening night", SEATS as i32, 20).await;
    let opens = Utc::now() + chrono::Duration::seconds(3);
    let changes = EventChanges { sales_from: Some(opens), ..EventChanges::default() };
    assert!(db.client.edit_event(ev, &changes).await.unwrap());
    let requests: Vec<NewRequest> =
        (0..LINE).map(|k| NewRequest::from(waiting(ev, 1, &format!("q{k}"), 600))).collect();
    let ids = db.client.enqueue_many(&requests).await.expect("enqueue");
    let r = db.client.status(ids[10]).await.unwrap();
    let place = r.place.expect("a place in line");
    assert_eq!((r.status, place.list, place.parties_ahead), (Status::Queued, PlaceList::Line, 10));
    // Due when the sales open, not refused before.
    assert_eq!(r.run_at.timestamp_millis() / 10, opens.timestamp_millis() / 10, "{r:?}");

    let config = Config { batch_size: 4, backlog_batch_size: 4, concurrency: 4, ..Config::default() };
    let running = Running::start(&db, 3, config).await;
    assert!(
        eventually(Duration::from_secs(60), || async {
            db.client
                .waiting_list(ev)
                .await
                .unwrap()
                .is_some_and(|l| l.in_line == 0 && l.waiting == (LINE - SEATS) as i64)
        })
        .await,
        "the line drained"
    );
    running.stop().await;
    let records = db.records(&ids).await;
    for (k, r) in records.iter().enumerate() {
        let expected = if k < SEATS { Status::Succeeded } else { Status::Waiting };
        assert_eq!(r.status, expected, "request {k} in line: {r:?}");
    }
    // And decided in that order: earlier requests got lower seats, and
    // their bookings were made first.
    let held: Vec<_> = records[..SEATS].iter().map(|r| r.booking().expect("held")).collect();
    let seats: Vec<i32> = held.iter().map(|b| b.seats[0].seat).collect();
    assert!(seats.windows(2).all(|w| w[0] < w[1]), "{seats:?}");
    let made: Vec<i64> = held.iter().map(|b| b.booking).collect();
    assert!(made.windows(2).all(|w| w[0] < w[1]), "{made:?}");
    db.assert_invariants_and_close().await;
}

/// A `book` that waited is handed its seats as a booking, not a hold, and a
/// side-by-side party is handed adjacent seats.
#[tokio::test]
async fn a_waiting_book_is_booked_and_a_party_together_sits_together() {
    let (db, ev) = with_event("Four in a row", 4, 4).await;
    let held = sell_out(&db, ev, 4).await;
    let mut book = hold(ev, 1, 1, "bea");
    book.wait_seconds = Some(600);
    let bea = enqueue(&db, Request::Book(book)).await;
    let mut pair = hold(ev, 1, 2, "two");
    pair.wait_seconds = Some(600);
    pair.together = true;
    let two = enqueue(&db, Request::Hold(pair)).await;
    db.drain().await;
    assert_eq!(db.client.status(bea).await.unwrap().status, Status::Waiting);
    assert_eq!(db.client.status(two).await.unwrap().status, Status::Waiting);
    // Seats 1 and 3 free: bea takes the cheapest (1); 3 alone is no pair.
    db.run(cancel(held[0], "h0")).await;
    db.run(cancel(held[2], "h2")).await;
    let b = db.client.status(bea).await.unwrap().booking().expect("bea booked");
    assert_eq!((b.state, b.held_until, b.seats[0].seat), (seatq::BookingState::Booked, None, 1));
    assert_eq!(db.client.status(two).await.unwrap().status, Status::Waiting, "seat 3 alone is no pair");
    // Seat 4 too: 3 and 4 side by side.
    db.run(cancel(held[3], "h3")).await;
    let pair = db.client.status(two).await.unwrap().booking().expect("the pair held");
    assert_eq!(pair.seats.iter().map(|s| s.seat).collect::<Vec<_>>(), [3, 4]);
    db.assert_invariants_and_close().await;
}
