//! The checkout lifecycle of a storefront: a hold is extended while the
//! customer pays (owner-checked, bounded, never shortened), then confirmed;
//! a hold that lapses instead is announced on `seatq_hold_lapsed`.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{TestDb, code, hold};
use seatq::limits::{DEFAULT_HOLD_SECONDS, MAX_HOLD_SECONDS};
use seatq::{BookingRef, BookingState, HoldExtension, Request, RequestRecord, SeatRequest, Status};
use seatq_core::sql::notify::HOLD_LAPSED_CHANNEL;
use seatq_worker::sweeper;

/// A test database with one event of 60 seats, six to a row (class 2 = 20-49).
async fn flight() -> (TestDb, i64) {
    TestDb::with_event("Flight C", 60, 6).await
}

/// Hold `party` seats of class 2 for `customer`, for `secs` seconds; the booking id.
async fn held(db: &TestDb, event: i64, party: u32, customer: &str, secs: u32) -> i64 {
    let mut r = hold(event, 2, party, customer);
    r.hold_seconds = Some(secs);
    let done = db.run(Request::Hold(r)).await;
    done.booking().unwrap_or_else(|| panic!("held: {done:?}")).booking
}

fn extension(booking: i64, customer: &str, secs: Option<u32>) -> Request {
    Request::Extend(HoldExtension { event: None, booking, customer: customer.into(), hold_seconds: secs, token: None })
}

/// The `held_until` of a booking and of each of its seats (seat order).
async fn expiries(db: &TestDb, booking: i64) -> (Option<DateTime<Utc>>, Vec<Option<DateTime<Utc>>>) {
    let of_booking = sqlx::query_scalar("SELECT held_until FROM seatq.bookings WHERE id = $1")
        .bind(booking)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let of_seats = sqlx::query_scalar(
        "SELECT s.held_until FROM seatq.bookings b JOIN seatq.seats s
             ON s.event_id = b.event_id AND s.seat_no = ANY (b.seats)
         WHERE b.id = $1 ORDER BY s.seat_no",
    )
    .bind(booking)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    (of_booking, of_seats)
}

fn until(r: &RequestRecord) -> DateTime<Utc> {
    r.booking().and_then(|b| b.held_until).unwrap_or_else(|| panic!("a hold's result: {r:?}"))
}

#[tokio::test]
async fn an_extended_hold_outlives_its_first_expiry_and_can_be_confirmed() {
    let (db, ev) = flight().await;
    let booking = held(&db, ev, 2, "ann", 1).await;
    let (first, _) = expiries(&db, booking).await;

    let r = db.run(extension(booking, "ann", Some(60))).await;
    assert_eq!(r.status, Status::Succeeded, "{r:?}");
    let b = r.booking().unwrap();
    assert_eq!((b.booking, b.state, b.seats.len(), b.capped), (booking, BookingState::Held, 2, false));
    let left = (until(&r) - Utc::now()).num_seconds();
    assert!((55..=60).contains(&left), "held for 60 s from now, {left}s left");
    assert!(Some(until(&r)) > first, "the hold moved on");
    assert_eq!(expiries(&db, booking).await, (Some(until(&r)), vec![Some(until(&r)); 2]), "booking and seats");
    assert_eq!(db.seat_states(ev, [35, 36]).await, ["held", "held"]);

    // Past the first expiry: nothing lapsed, the seats are still the hold's.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(sweeper::sweep(&db.pool).await.unwrap(), sweeper::Swept::default(), "nothing lapsed");
    let r = db.run(Request::Book(SeatRequest::named(ev, vec![35], "eve"))).await;
    assert_eq!(code(&r), "seats_taken", "an extended hold keeps its seats");
    let r = db.run(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(r.booking().map(|b| b.state), Some(BookingState::Booked), "{r:?}");
    assert_eq!(db.seat_states(ev, [35, 36]).await, ["booked", "booked"]);

    // With no hold_seconds, the default hold time.
    let other = held(&db, ev, 1, "bob", 1).await;
    let r = db.run(extension(other, "bob", None)).await;
    let left = (until(&r) - Utc::now()).num_seconds();
    let default = i64::from(DEFAULT_HOLD_SECONDS);
    assert!((default - 5..=default).contains(&left), "the default hold time, {left}s left");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn only_the_holder_can_extend_an_existing_hold() {
    let (db, ev) = flight().await;
    let booking = held(&db, ev, 2, "ann", 30).await;
    let before = expiries(&db, booking).await;

    let r = db.run(extension(booking, "eve", Some(600))).await;
    assert_eq!(code(&r), "booking_not_found", "{r:?}");
    assert_eq!(expiries(&db, booking).await, before, "a stranger's extend changes nothing");

    let r = db.run(extension(9999, "ann", Some(600))).await;
    assert_eq!(code(&r), "booking_not_found", "{r:?}");
    assert_eq!(expiries(&db, booking).await, before);
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_lapsed_a_booked_or_a_cancelled_booking_cannot_be_extended() {
    let (db, ev) = flight().await;
    let lapsing = held(&db, ev, 1, "ann", 1).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let r = db.run(extension(lapsing, "ann", Some(600))).await;
    assert_eq!(code(&r), "hold_expired", "lapsed, not yet swept: {r:?}");
    sweeper::sweep(&db.pool).await.unwrap();
    let r = db.run(extension(lapsing, "ann", Some(600))).await;
    assert_eq!(code(&r), "hold_expired", "swept: {r:?}");

    let booked = db.run(Request::Book(hold(ev, 2, 2, "bob"))).await.booking().unwrap().booking;
    let r = db.run(extension(booked, "bob", Some(600))).await;
    assert_eq!(code(&r), "not_held", "{r:?}");
    assert_eq!(expiries(&db, booked).await, (None, vec![None, None]), "still booked, with no expiry");

    let cancelled = held(&db, ev, 1, "cat", 600).await;
    db.run(Request::Cancel(BookingRef { event: None, booking: cancelled, customer: "cat".into(), token: None })).await;
    let r = db.run(extension(cancelled, "cat", Some(600))).await;
    assert_eq!(code(&r), "booking_cancelled", "{r:?}");
    assert_eq!(expiries(&db, cancelled).await.0, None);
    assert_eq!(db.seats_taken(ev).await, 2, "only the booked seats are taken");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn an_extension_is_bounded_by_the_longest_hold_and_never_shortens() {
    let (db, ev) = flight().await;
    // Asking for less than is left changes nothing.
    let booking = held(&db, ev, 1, "ann", 600).await;
    let (first, _) = expiries(&db, booking).await;
    let r = db.run(extension(booking, "ann", Some(10))).await;
    assert_eq!((Some(until(&r)), r.booking().unwrap().capped), (first, false), "never shortened");
    assert_eq!(expiries(&db, booking).await, (first, vec![first]));

    // A hold made for nearly the longest time: asking for the longest time
    // again, from now, gets the longest time from when the hold was made.
    let long = held(&db, ev, 2, "bob", MAX_HOLD_SECONDS - 30).await;
    let limit: DateTime<Utc> =
        sqlx::query_scalar("SELECT created_at + make_interval(secs => $2) FROM seatq.bookings WHERE id = $1")
            .bind(long)
            .bind(f64::from(MAX_HOLD_SECONDS))
            .fetch_one(&db.pool)
            .await
            .unwrap();
    for _ in 0..2 {
        let r = db.run(extension(long, "bob", Some(MAX_HOLD_SECONDS))).await;
        let b = r.booking().unwrap();
        assert_eq!((b.held_until, b.capped), (Some(limit), true), "{r:?}");
        assert_eq!(r.result.as_ref().and_then(|v| v.get("capped")), Some(&serde_json::json!(true)));
        assert_eq!(expiries(&db, long).await, (Some(limit), vec![Some(limit); 2]));
    }
    // More than the longest hold is malformed, like a hold's.
    let err = db.client.enqueue(extension(long, "bob", Some(MAX_HOLD_SECONDS + 1))).await.expect_err("refused");
    assert!(matches!(&err, seatq::Error::Invalid(e) if e.code() == "hold_time_out_of_range"), "{err}");
    db.assert_invariants_and_close().await;
}

/// The next notification on `listener` within `limit`, or `None`.
async fn next(listener: &mut sqlx::postgres::PgListener, limit: Duration) -> Option<String> {
    match tokio::time::timeout(limit, listener.recv()).await {
        Ok(n) => Some(n.expect("listening").payload().to_string()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_lapsed_hold_is_announced_when_swept_and_a_confirmed_one_never() {
    let (db, ev) = flight().await;
    let mut listener = seatq::db::listen(&db.pool, HOLD_LAPSED_CHANNEL).await.unwrap();
    let lapsing = held(&db, ev, 2, "ann", 1).await;
    let confirmed = held(&db, ev, 1, "bob", 1).await;
    let r = db
        .run(Request::Confirm(BookingRef { event: None, booking: confirmed, customer: "bob".into(), token: None }))
        .await;
    assert_eq!(r.status, Status::Succeeded, "{r:?}");
    let live = held(&db, ev, 1, "cat", 600).await;
    assert_eq!(next(&mut listener, Duration::from_millis(300)).await, None, "nothing lapsed yet");

    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(next(&mut listener, Duration::from_millis(300)).await, None, "announced by the sweep, not before");
    let swept = sweeper::sweep(&db.pool).await.unwrap();
    assert_eq!(swept, sweeper::Swept { seats: 2, bookings: 1, waiting: 0 });
    assert_eq!(next(&mut listener, Duration::from_secs(5)).await, Some(lapsing.to_string()));
    // The listener re-reads: the booking is already expired when it hears.
    let state: String = sqlx::query_scalar("SELECT state::text FROM seatq.bookings WHERE id = $1")
        .bind(lapsing)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(state, "expired");

    // Once only; the confirmed and the live hold never.
    assert_eq!(sweeper::sweep(&db.pool).await.unwrap(), sweeper::Swept::default());
    assert_eq!(next(&mut listener, Duration::from_millis(500)).await, None, "{confirmed} and {live} stay quiet");
    db.assert_invariants_and_close().await;
}
