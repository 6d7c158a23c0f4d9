//! Holds expire both ways: passively (a lapsed hold is free to the next
//! request before any sweep) and actively (the sweeper frees it).

mod common;

use std::time::Duration;

use common::{Running, TestDb, code, eventually, hold};
use seatq::{BookingRef, Request};
use seatq_worker::{Config, sweeper};

async fn short_hold(db: &TestDb, event: i64, party: u32) -> i64 {
    let mut r = hold(event, 1, party, "ann");
    r.hold_seconds = Some(1);
    db.run(Request::Hold(r)).await.booking().expect("held").booking
}

#[tokio::test]
async fn a_lapsed_hold_is_free_before_any_sweep() {
    let (db, ev) = TestDb::with_event("Two seats", 2, 6).await;
    let booking = short_hold(&db, ev, 2).await;
    let r = db.run(Request::Book(hold(ev, 1, 2, "bob"))).await;
    assert_eq!(code(&r), "sold_out", "the hold is still live");

    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(db.seat_states(ev, 1..=2).await, ["held", "held"], "no sweeper has run");
    let r = db.run(Request::Book(hold(ev, 1, 2, "bob"))).await;
    assert_eq!(r.booking().expect("booked").seats.len(), 2, "{r:?}");
    assert_eq!(db.seat_states(ev, 1..=2).await, ["booked", "booked"]);

    let r = db.run(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(code(&r), "hold_expired");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_sweeper_frees_lapsed_holds() {
    let (db, ev) = TestDb::with_event("Four seats", 4, 6).await;
    let lapsing = short_hold(&db, ev, 2).await;
    let live = db.run(Request::Hold(hold(ev, 1, 1, "cat"))).await.booking().unwrap().booking;
    assert_eq!(sweeper::sweep(&db.pool).await.unwrap(), sweeper::Swept::default(), "nothing lapsed yet");

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let swept = sweeper::sweep(&db.pool).await.unwrap();
    assert_eq!(swept, sweeper::Swept { seats: 2, bookings: 1, waiting: 0 });
    assert_eq!(db.seat_states(ev, 1..=4).await, ["available", "available", "held", "available"]);
    let state: Vec<String> =
        sqlx::query_scalar("SELECT state::text FROM seatq.bookings WHERE id = ANY($1) ORDER BY id")
            .bind(vec![lapsing, live])
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(state, ["expired", "held"]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_running_worker_sweeps_by_itself() {
    let (db, ev) = TestDb::with_event("Three seats", 3, 6).await;
    short_hold(&db, ev, 3).await;
    let config = Config { sweep_interval: Duration::from_millis(100), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    let freed =
        eventually(Duration::from_secs(30), || async { db.seat_states(ev, 1..=3).await == ["available"; 3] }).await;
    workers.stop().await;
    assert!(freed, "the worker's sweeper never freed the lapsed hold: {:?}", db.seat_states(ev, 1..=3).await);
    db.assert_invariants_and_close().await;
}
