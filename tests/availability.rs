//! What a storefront reads: free seats and prices per class, and the seat
//! map (`seatq.availability`, `seatq.seat_map`), matching the seats' real
//! states after holds, bookings, a lapsed hold (free before any sweep) and a
//! cancel; readable by a producer login, which still cannot read seats or
//! bookings; naming no customer and no booking.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{TestDb, hold};
use seatq::{BookingRef, Client, Request, SeatAvailability, Status};
use sqlx::Executor;
use sqlx::postgres::PgPool;

/// How each seat of the event really stands, from the table itself: booked,
/// held (the hold live), or free (available, or the hold lapsed); with its
/// class and price.
async fn real_states(db: &TestDb, event: i64) -> BTreeMap<i32, (i16, i32, SeatAvailability)> {
    let rows: Vec<(i32, i16, i32, String)> = sqlx::query_as(
        "SELECT seat_no, class, price_cents,
                CASE WHEN state = 'booked' THEN 'booked'
                     WHEN state = 'held' AND held_until > now() THEN 'held'
                     ELSE 'free' END
         FROM seatq.seats WHERE event_id = $1",
    )
    .bind(event)
    .fetch_all(&db.pool)
    .await
    .expect("read the seats");
    rows.into_iter().map(|(seat, class, price, state)| (seat, (class, price, state.parse().expect("state")))).collect()
}

#[tokio::test]
async fn availability_and_the_seat_map_match_the_seats() {
    let db = TestDb::new().await;
    // 60 seats: class 1 is 1-19, class 2 is 20-49, class 3 is 50-60.
    let ev = db.client.add_event("Storefront", 60, 6).await.unwrap();
    let other = db.client.add_event("Elsewhere", 60, 6).await.unwrap();

    let ann = db.run(Request::Hold(hold(ev, 1, 2, "ann"))).await.booking().expect("ann holds");
    let bob = db.run(Request::Book(hold(ev, 1, 3, "bob"))).await.booking().expect("bob books");
    let mut short = hold(ev, 2, 2, "cat");
    short.hold_seconds = Some(1);
    let cat = db.run(Request::Hold(short)).await.booking().expect("cat holds");
    let dan = db.run(Request::Hold(hold(ev, 3, 4, "dan"))).await.booking().expect("dan holds");
    let cancel = db.run(Request::Cancel(BookingRef { booking: dan.booking, customer: "dan".into() })).await;
    assert_eq!(cancel.status, Status::Succeeded, "{cancel:?}");
    let eve = db.run(Request::Book(hold(ev, 2, 1, "eve"))).await.booking().expect("eve books");
    db.run(Request::Book(hold(other, 1, 5, "zed"))).await.booking().expect("another event");
    tokio::time::sleep(Duration::from_millis(1200)).await;

    // Cat's hold has lapsed but nothing has swept it: still marked held.
    let cat_seats: Vec<i32> = cat.seats.iter().map(|s| s.seat).collect();
    assert_eq!(db.seat_states(ev, cat_seats.clone()).await, ["held", "held"], "no sweeper has run");

    let summary = db.client.availability(ev).await.unwrap();
    let map = db.client.seat_map(ev).await.unwrap();

    // The map: every seat, in order, as it really stands.
    let real = real_states(&db, ev).await;
    assert_eq!(map.len(), 60);
    let shown: BTreeMap<i32, (i16, i32, SeatAvailability)> =
        map.iter().map(|s| (s.seat, (s.class, s.price_cents, s.state))).collect();
    assert_eq!(shown, real);
    assert!(map.windows(2).all(|w| w[0].seat < w[1].seat), "in seat order");
    for s in &map {
        assert_eq!((s.row, s.pos), ((s.seat - 1) / 6 + 1, (s.seat - 1) % 6 + 1), "seat {}", s.seat);
    }
    let state_of = |seat: i32| shown[&seat].2;
    for s in &ann.seats {
        assert_eq!(state_of(s.seat), SeatAvailability::Held, "ann's live hold");
    }
    for s in bob.seats.iter().chain(&eve.seats) {
        assert_eq!(state_of(s.seat), SeatAvailability::Booked, "a booking");
    }
    for s in cat.seats.iter().chain(&dan.seats) {
        assert_eq!(state_of(s.seat), SeatAvailability::Free, "lapsed or cancelled");
    }

    // The summary: counted from the real states, class by class.
    assert_eq!(summary.iter().map(|c| c.class).collect::<Vec<_>>(), [1, 2, 3]);
    for c in &summary {
        let seats: Vec<&(i16, i32, SeatAvailability)> = real.values().filter(|s| s.0 == c.class).collect();
        let count = |st: SeatAvailability| seats.iter().filter(|s| s.2 == st).count() as i64;
        let free_prices = seats.iter().filter(|s| s.2 == SeatAvailability::Free).map(|s| s.1);
        let all_prices = seats.iter().map(|s| s.1);
        assert_eq!(c.seats, seats.len() as i64, "class {}", c.class);
        assert_eq!(c.free, count(SeatAvailability::Free), "class {}", c.class);
        assert_eq!(c.held, count(SeatAvailability::Held), "class {}", c.class);
        assert_eq!(c.booked, count(SeatAvailability::Booked), "class {}", c.class);
        assert_eq!(c.free_min_cents, free_prices.clone().min(), "class {}", c.class);
        assert_eq!(c.free_max_cents, free_prices.max(), "class {}", c.class);
        assert_eq!(c.min_cents, all_prices.clone().min().unwrap_or_default(), "class {}", c.class);
        assert_eq!(c.max_cents, all_prices.max().unwrap_or_default(), "class {}", c.class);
    }
    // And by hand: ann holds 2 and bob booked 3 of class 1's 19 seats; eve
    // booked 1 of class 2's 30 (cat's 2 lapsed); dan's 4 of class 3 are back.
    let by_class: Vec<(i64, i64, i64, i64)> = summary.iter().map(|c| (c.seats, c.free, c.held, c.booked)).collect();
    assert_eq!(by_class, [(19, 14, 2, 3), (30, 29, 0, 1), (11, 11, 0, 0)]);
    assert_eq!((summary[0].min_cents, summary[0].max_cents), (75000, 90000));
    assert_eq!((summary[2].free_min_cents, summary[2].free_max_cents), (Some(12000), Some(15000)));

    // A sold-out class has no free price range; an unknown event has no rows.
    for party in [9, 2] {
        let rest = db.run(Request::Book(hold(ev, 3, party, "fay"))).await;
        assert_eq!(rest.status, Status::Succeeded, "{rest:?}");
    }
    let summary = db.client.availability(ev).await.unwrap();
    assert_eq!((summary[2].free, summary[2].free_min_cents, summary[2].free_max_cents), (0, None, None));
    assert!(db.client.availability(other + 100).await.unwrap().is_empty());
    assert!(db.client.seat_map(other + 100).await.unwrap().is_empty());

    // Nothing names a customer or a booking.
    let json = serde_json::to_string(&(&summary, &map)).unwrap();
    for word in ["ann", "bob", "cat", "dan", "eve", "fay", "booking", "customer"] {
        assert!(!json.contains(word), "{word} in {json}");
    }
    for (function, columns) in [
        ("availability", "class,seats,free,held,booked,free_min_cents,free_max_cents,min_cents,max_cents"),
        ("seat_map", "seat_no,section,row_label,label,row_no,pos,class,price_cents,state"),
    ] {
        let names: String = sqlx::query_scalar(
            "SELECT string_agg(a.name, ',' ORDER BY a.ord)
             FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS a(name, mode, ord)
             WHERE p.oid = ('seatq.' || $1 || '(bigint)')::regprocedure AND a.mode = 't'",
        )
        .bind(function)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(names, columns, "the columns of seatq.{function}");
    }
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_producer_login_reads_availability_but_not_the_seats() {
    let (db, ev) = TestDb::with_event("E", 30, 6).await;
    db.run(Request::Hold(hold(ev, 1, 2, "ann"))).await.booking().expect("held");
    db.run(Request::Book(hold(ev, 2, 3, "bob"))).await.booking().expect("booked");

    let name = format!("{}_storefront", db.name);
    db.pool.execute(sqlx::AssertSqlSafe(format!("CREATE ROLE \"{name}\" LOGIN IN ROLE seatq_producer"))).await.unwrap();
    let pool = PgPool::connect_with(db.options.clone().username(&name)).await.unwrap();
    let shop = Client::from_pool(pool.clone());

    assert_eq!(shop.availability(ev).await.unwrap(), db.client.availability(ev).await.unwrap());
    assert_eq!(shop.seat_map(ev).await.unwrap(), db.client.seat_map(ev).await.unwrap());
    let taken = shop.seat_map(ev).await.unwrap().iter().filter(|s| s.state != SeatAvailability::Free).count();
    assert_eq!(taken, 5);
    let err = sqlx::query("SELECT 1 FROM seatq.seats").execute(&pool).await.expect_err("the producer reads no seats");
    assert_eq!(seatq::sqlstate::code(&err).as_deref(), Some(seatq::sqlstate::INSUFFICIENT_PRIVILEGE), "{err}");
    // It reads only the bookings its own requests made: none of these.
    let bookings: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.bookings").fetch_one(&pool).await.unwrap();
    assert_eq!(bookings, 0, "another producer's bookings are not the storefront's to see");

    pool.close().await;
    db.pool.execute(sqlx::AssertSqlSafe(format!("DROP ROLE \"{name}\""))).await.unwrap();
    db.assert_invariants_and_close().await;
}
