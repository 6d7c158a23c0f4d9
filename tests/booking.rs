//! Every request kind and every error code, against a real database.

mod common;

use chrono::Utc;
use common::{TestDb, bookings, code, hold};
use seatq::{BookingRef, BookingState, HoldExtension, NewRequest, Request, SeatRequest, Status};

/// A test database with one event of 60 seats, six to a row: class 1 = seats
/// 1-19, class 2 = 20-49, class 3 = 50-60; cheapest of class 3 are 56-60.
async fn flight() -> (TestDb, i64) {
    TestDb::with_event("Flight T", 60, 6).await
}

/// A test database with one event of 300 seats, six to a row, whose class 3
/// has two price levels.
async fn big_venue() -> (TestDb, i64) {
    let (db, ev) = TestDb::with_event("Big", 300, 6).await;
    (db, ev)
}

fn seats_of(r: &seatq::RequestRecord) -> Vec<i32> {
    r.booking().expect("a booking result").seats.iter().map(|s| s.seat).collect()
}

#[tokio::test]
async fn hold_takes_the_cheapest_seats_and_reports_them() {
    let (db, ev) = flight().await;
    let r = db.run(Request::Hold(hold(ev, 3, 3, "ann"))).await;
    assert_eq!(r.status, Status::Succeeded, "{r:?}");
    let b = r.booking().unwrap();
    assert_eq!(seats_of(&r), vec![56, 57, 58]);
    assert!(b.seats.iter().all(|s| s.class == 3 && s.price_cents == 12000));
    assert_eq!(b.total_cents, 36000);
    assert_eq!(b.state, BookingState::Held);
    let left = (b.held_until.unwrap() - Utc::now()).num_seconds();
    assert!((590..=600).contains(&left), "default hold is 10 minutes, {left}s left");
    assert_eq!(db.seat_states(ev, [56]).await, ["held"]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn book_confirms_at_once() {
    let (db, ev) = flight().await;
    let r = db.run(Request::Book(hold(ev, 2, 4, "bob"))).await;
    let b = r.booking().unwrap();
    assert_eq!((b.state.as_str(), b.held_until), ("booked", None));
    assert_eq!(seats_of(&r), vec![35, 36, 37, 38]);
    assert_eq!(db.seat_states(ev, 35..=38).await, ["booked"; 4]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn named_seats_are_all_or_nothing() {
    let (db, ev) = flight().await;
    let r = db.run(Request::Book(SeatRequest::named(ev, vec![2, 3], "bob"))).await;
    assert_eq!(seats_of(&r), vec![2, 3]);

    let r = db.run(Request::Hold(SeatRequest::named(ev, vec![3, 4], "cat"))).await;
    assert_eq!(code(&r), "seats_taken");
    assert!(r.error_message.as_deref().unwrap().contains('3'), "{r:?}");
    assert_eq!(db.seat_states(ev, [4]).await, ["available"], "nothing taken when one named seat is not free");

    let r = db.run(Request::Book(SeatRequest::named(ev, vec![4, 61], "cat"))).await;
    assert_eq!(code(&r), "unknown_seat");
    assert!(r.error_message.as_deref().unwrap().contains("61"), "{r:?}");
    assert_eq!(db.seat_states(ev, [4]).await, ["available"]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn together_seats_a_party_side_by_side_or_fails_clearly() {
    let (db, ev) = flight().await;
    let mut r = hold(ev, 1, 4, "dan");
    r.together = true;
    let done = db.run(Request::Hold(r)).await;
    let seats = done.booking().unwrap().seats;
    assert_eq!(seats.len(), 4);
    assert!(seats.iter().all(|s| s.row == seats[0].row), "one row: {seats:?}");
    assert!(seats.windows(2).all(|w| w[1].pos == w[0].pos + 1), "adjacent: {seats:?}");

    // Twelve seats in two rows of six; taking the third seat of each row
    // leaves runs of at most three.
    let small = db.client.add_event("Small", 12, 6).await.unwrap();
    db.run(Request::Book(SeatRequest::named(small, vec![3, 9], "eve"))).await;
    let mut four = hold(small, 1, 4, "fay");
    four.together = true;
    let r = db.run(Request::Book(four)).await;
    assert_eq!(code(&r), "no_adjacent_seats", "{r:?}");
    let mut three = hold(small, 1, 3, "fay");
    three.together = true;
    let r = db.run(Request::Book(three)).await;
    assert_eq!(seats_of(&r), vec![10, 11, 12], "cheapest adjacent block");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn sold_out_unless_partial() {
    let (db, ev) = TestDb::with_event("Five", 5, 6).await;
    db.run(Request::Book(hold(ev, 1, 2, "a"))).await;

    let r = db.run(Request::Book(hold(ev, 1, 5, "b"))).await;
    assert_eq!(code(&r), "sold_out");
    assert!(r.error_message.as_deref().unwrap().starts_with("3 seat(s)"), "{r:?}");
    assert_eq!(db.seats_taken(ev).await, 2, "a group never gets fewer seats than it asked for");

    let mut partial = hold(ev, 1, 5, "c");
    partial.partial = true;
    let r = db.run(Request::Hold(partial.clone())).await;
    assert_eq!(seats_of(&r), vec![3, 4, 5]);

    let r = db.run(Request::Hold(partial)).await;
    assert_eq!(code(&r), "sold_out");
    assert!(r.error_message.as_deref().unwrap().starts_with("0 seat(s)"), "{r:?}");
    assert_eq!(db.seats_taken(ev).await, 5);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn confirm_and_cancel_are_owner_checked() {
    let (db, ev) = flight().await;
    let booking = db.run(Request::Hold(hold(ev, 2, 2, "ann"))).await.booking().unwrap().booking;
    let by = |customer: &str| BookingRef { event: None, booking, customer: customer.into(), token: None };

    // Another customer is told what a stranger to every booking is told.
    for r in [db.run(Request::Confirm(by("eve"))).await, db.run(Request::Cancel(by("eve"))).await] {
        assert_eq!(code(&r), "booking_not_found", "{r:?}");
        assert_eq!(r.error_message.as_deref(), Some(format!("booking {booking} does not exist").as_str()));
    }
    assert_eq!(db.seats_taken(ev).await, 2, "a stranger's cancel frees nothing");
    // Her name in another case and width is hers (compared in normal form).
    let r = db
        .run(Request::Extend(HoldExtension {
            event: None,
            booking,
            customer: " ＡＮＮ".into(),
            hold_seconds: None,
            token: None,
        }))
        .await;
    assert_eq!(r.booking().map(|b| b.state), Some(BookingState::Held), "{r:?}");

    let r = db.run(Request::Confirm(by("ann"))).await;
    assert_eq!(r.booking().unwrap().state, BookingState::Booked);
    assert_eq!(db.seat_states(ev, [35]).await, ["booked"]);
    // Confirming twice is safe: the same answer.
    let r = db.run(Request::Confirm(by("ann"))).await;
    assert_eq!(r.booking().unwrap().state, BookingState::Booked);

    let r = db.run(Request::Cancel(by("ann"))).await;
    assert_eq!(r.booking().unwrap().state, BookingState::Cancelled);
    assert_eq!(db.seats_taken(ev).await, 0);
    assert_eq!(db.seat_states(ev, [35]).await, ["available"]);
    let r = db.run(Request::Confirm(by("ann"))).await;
    assert_eq!(code(&r), "booking_cancelled");

    let r =
        db.run(Request::Confirm(BookingRef { event: None, booking: 9999, customer: "ann".into(), token: None })).await;
    assert_eq!(code(&r), "booking_not_found");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn confirm_after_expiry_fails_with_hold_expired() {
    let (db, ev) = flight().await;
    let mut r = hold(ev, 1, 2, "ann");
    r.hold_seconds = Some(1);
    let booking = db.run(Request::Hold(r)).await.booking().unwrap().booking;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let r = db.run(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(code(&r), "hold_expired", "{r:?}");
    let r = db.run(Request::Cancel(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(code(&r), "hold_expired", "{r:?}");
    assert_eq!(db.seats_taken(ev).await, 0);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn unknown_event_and_unknown_kind() {
    let db = TestDb::new().await;
    let r = db.run(Request::Book(hold(404, 1, 1, "ann"))).await;
    assert_eq!(code(&r), "unknown_event");
    assert!(r.error_message.as_deref().unwrap().contains("404"));

    let id: i64 = sqlx::query_scalar("SELECT seatq.enqueue('reserve', '{}')").fetch_one(&db.pool).await.unwrap();
    db.drain().await;
    let r = db.client.status(id).await.unwrap();
    assert_eq!((r.status, code(&r)), (Status::Failed, "unknown_kind"));
    assert!(r.error_message.as_deref().unwrap().contains("reserve"));
    db.assert_invariants_and_close().await;
}

/// The cheapest seat of a class: the one a cheapest-first request gets first.
async fn cheapest_seat(db: &TestDb, event: i64, class: i16) -> i32 {
    sqlx::query_scalar(
        "SELECT seat_no FROM seatq.seats WHERE event_id = $1 AND class = $2 ORDER BY price_cents, seat_no LIMIT 1",
    )
    .bind(event)
    .bind(class)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_named_seat_claimed_first_is_not_lost_to_a_later_cheapest_first_request_of_the_same_batch() {
    let (db, ev) = flight().await;
    // Older first: the named book, then a cheapest-first book that wants the same seat.
    let seat = cheapest_seat(&db, ev, 3).await;
    let older = NewRequest::from(Request::Book(SeatRequest::named(ev, vec![seat], "ann")));
    let newer = NewRequest::from(Request::Book(hold(ev, 3, 1, "bob")));
    // Higher priority first, though enqueued later.
    let seat_1 = cheapest_seat(&db, ev, 1).await;
    let low = NewRequest::from(Request::Book(hold(ev, 1, 1, "cat")));
    let high =
        NewRequest { priority: 5, ..NewRequest::from(Request::Book(SeatRequest::named(ev, vec![seat_1], "dan"))) };
    let ids = db.client.enqueue_many(&[older, newer, low, high]).await.unwrap();
    db.drain().await; // one batch: the drain claims up to 100

    let r = db.records(&ids).await;
    let [ann, bob, cat, dan] = &r[..] else { unreachable!() };
    for r in &r {
        assert_eq!(r.status, Status::Succeeded, "{r:?}");
    }
    assert_eq!(seats_of(ann), [seat], "the older named request keeps its seat");
    assert!(!seats_of(bob).contains(&seat), "{bob:?}");
    assert_eq!(seats_of(dan), [seat_1], "the higher-priority named request keeps its seat");
    assert!(!seats_of(cat).contains(&seat_1), "{cat:?}");
    assert_eq!(db.seats_taken(ev).await, 4);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn one_batch_of_named_side_by_side_and_cheapest_requests_grants_each_seat_once_in_claim_order() {
    use seatq_worker::batch::{self, Claim};
    // Two rows of six, all class 1: seats 1-9 dearer, 10-12 cheaper.
    let (db, ev) = TestDb::with_event("Twelve", 12, 6).await;
    let side_by_side = |party, customer| {
        let mut r = hold(ev, 1, party, customer);
        r.together = true;
        Request::Book(r)
    };
    let requests: Vec<NewRequest> = vec![
        Request::Book(SeatRequest::named(ev, vec![7, 8], "ann")).into(),
        // Seat 8 is ann's, claimed earlier in the same batch.
        Request::Book(SeatRequest::named(ev, vec![8, 9], "bob")).into(),
        // The cheapest block (10-12), then the cheapest left in row 1.
        side_by_side(3, "cat").into(),
        side_by_side(3, "dan").into(),
        // Four side by side: none left once cat and dan have theirs.
        side_by_side(4, "eve").into(),
        // The cheapest seats left: 10-12 and 1-3 are cat's and dan's.
        Request::Book(hold(ev, 1, 2, "fay")).into(),
    ];
    let ids = db.client.enqueue_many(&requests).await.unwrap();

    let metrics = seatq_worker::metrics::Metrics::default();
    let strategy = seatq_worker::Strategy::SkipLocked;
    let report = batch::run(&db.pool, Claim::Next(100), None, strategy, &metrics, &mut Vec::new(), None).await.unwrap();
    assert_eq!((report.claimed, report.finished), (ids.len(), ids.len()), "one batch decides them all: {report:?}");
    let r = db.records(&ids).await;
    assert_eq!(seats_of(&r[0]), [7, 8], "{:?}", r[0]);
    assert_eq!(
        (code(&r[1]), r[1].error_message.as_deref()),
        ("seats_taken", Some("seat(s) 8 are taken (Cabin, row 2, seat 2B)"))
    );
    assert_eq!(seats_of(&r[2]), [10, 11, 12], "{:?}", r[2]);
    assert_eq!(seats_of(&r[3]), [1, 2, 3], "{:?}", r[3]);
    assert_eq!(code(&r[4]), "no_adjacent_seats", "{:?}", r[4]);
    assert_eq!(seats_of(&r[5]), [4, 5], "{:?}", r[5]);
    assert_eq!(db.seats_taken(ev).await, 10);
    assert_eq!(db.seat_states(ev, [6, 9]).await, ["available", "available"]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_cancel_claimed_before_a_hold_in_the_same_batch_frees_seats_for_it() {
    let (db, ev) = TestDb::with_event("Five", 5, 6).await;
    let booking = db.run(Request::Book(hold(ev, 1, 5, "ann"))).await.booking().unwrap().booking;
    assert_eq!(db.seats_taken(ev).await, 5, "sold out");

    let cancel = Request::Cancel(BookingRef { event: None, booking, customer: "ann".into(), token: None });
    let ids = db.client.enqueue_many(&[cancel.into(), Request::Hold(hold(ev, 1, 2, "bob")).into()]).await.unwrap();
    db.drain().await; // one batch
    let cancelled = db.client.status(ids[0]).await.unwrap();
    assert_eq!(cancelled.booking().map(|b| b.state), Some(BookingState::Cancelled), "{cancelled:?}");
    let held = db.client.status(ids[1]).await.unwrap();
    assert_eq!(held.status, Status::Succeeded, "{held:?}");
    assert_eq!(seats_of(&held).len(), 2);
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_batch_that_cannot_process_everything_leaves_only_the_latest_claimed_queued() {
    use seatq_worker::batch::{self, Claim, MAX_SAVEPOINTS};
    let (db, ev) = flight().await;
    // Two confirms more than a batch processes one at a time (one savepoint
    // is kept for its holds and bookings), then a booking, taken with the
    // rest of the batch's holds and bookings: the last two confirms claimed
    // must be the two left over.
    let n = MAX_SAVEPOINTS + 1;
    let holds: Vec<NewRequest> =
        (1..=n as i32).map(|s| Request::Hold(SeatRequest::named(ev, vec![s], format!("c{s}"))).into()).collect();
    let held = db.client.enqueue_many(&holds).await.unwrap();
    db.drain().await;
    let mut requests: Vec<NewRequest> = Vec::new();
    for (k, id) in held.iter().enumerate() {
        let booking = db.client.status(*id).await.unwrap().booking().expect("held").booking;
        requests.push(
            Request::Confirm(BookingRef { event: None, booking, customer: format!("c{}", k + 1), token: None }).into(),
        );
    }
    requests.push(Request::Book(hold(ev, 3, 1, "last")).into());
    let ids = db.client.enqueue_many(&requests).await.unwrap();

    let metrics = seatq_worker::metrics::Metrics::default();
    let strategy = seatq_worker::Strategy::SkipLocked;
    let report = batch::run(&db.pool, Claim::Next(100), None, strategy, &metrics, &mut Vec::new(), None).await.unwrap();
    assert_eq!((report.claimed, report.finished, report.left_over), (ids.len(), MAX_SAVEPOINTS, 2));
    let statuses: Vec<Status> = db.records(&ids).await.iter().map(|r| r.status).collect();
    let (confirms, book) = statuses.split_at(n);
    let (done, left) = confirms.split_at(n - 2);
    assert!(done.iter().all(|s| *s == Status::Succeeded), "{statuses:?}");
    assert_eq!(left, [Status::Queued, Status::Queued], "only the latest claimed wait for the next batch");
    assert_eq!(book, [Status::Succeeded], "the booking is taken with the batch");

    db.drain().await;
    db.assert_all_succeeded(&ids).await;
    assert_eq!(db.seats_taken(ev).await, n as i64 + 1);
    db.assert_invariants_and_close().await;
}

/// Class 3's price levels, cheapest first: (price, seats, seats taken).
async fn class_3_levels(db: &TestDb, event: i64) -> Vec<(i32, i64, i64)> {
    sqlx::query_as(
        "SELECT price_cents, count(*), count(*) FILTER (WHERE state <> 'available') FROM seatq.seats
         WHERE event_id = $1 AND class = 3 GROUP BY 1 ORDER BY 1",
    )
    .bind(event)
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

/// Seats taken per price level of class 3, cheapest first: (price, taken).
async fn class_3_taken(db: &TestDb, event: i64) -> Vec<(i32, i64)> {
    class_3_levels(db, event).await.into_iter().map(|(price, _, taken)| (price, taken)).collect()
}

#[tokio::test]
async fn a_big_batch_for_one_class_still_takes_only_the_cheapest_level_while_it_lasts() {
    // 20 parties of 3 in one batch: 60 seats, enough to start at a random
    // seat of the cheapest level (SPREAD_FROM_NEED) rather than at its head.
    const { assert!(60 >= seatq_worker::sql::allocation::SPREAD_FROM_NEED) };
    let (db, ev) = big_venue().await;
    let levels = class_3_levels(&db, ev).await;
    assert!(levels.len() == 2 && levels[0].1 > 60, "{levels:?}");
    let requests = bookings(ev, 3, 3, 20);
    let ids = db.client.enqueue_many(&requests).await.unwrap();
    db.drain().await;
    for r in db.records(&ids).await {
        assert_eq!(r.status, Status::Succeeded, "{r:?}");
        assert!(r.booking().unwrap().seats.iter().all(|s| s.price_cents == levels[0].0), "{r:?}");
    }
    assert_eq!(class_3_taken(&db, ev).await, vec![(levels[0].0, 60), (levels[1].0, 0)]);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_big_batch_takes_the_whole_cheapest_level_before_any_dearer_seat() {
    let (db, ev) = big_venue().await;
    let levels = class_3_levels(&db, ev).await;
    // 40 parties of 4: more than the cheapest level holds, less than the class.
    let need = 160;
    assert!(levels.len() == 2 && levels[0].1 < need && levels[0].1 + levels[1].1 > need, "{levels:?}");
    let requests = bookings(ev, 3, 4, 40);
    let ids = db.client.enqueue_many(&requests).await.unwrap();
    db.drain().await;
    db.assert_all_succeeded(&ids).await;
    let cheap = levels[0].1;
    assert_eq!(class_3_taken(&db, ev).await, vec![(levels[0].0, cheap), (levels[1].0, need - cheap)]);
    assert_eq!(db.seats_taken(ev).await, need);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_spread_start_skips_held_seats_and_empties_the_cheapest_level_before_the_next() {
    let (db, ev) = big_venue().await;
    let levels = class_3_levels(&db, ev).await;
    assert_eq!(levels.len(), 2, "{levels:?}");
    // Another transaction holds every seat of the cheapest level but its
    // first five.
    let mut other = db.pool.begin().await.unwrap();
    let held: Vec<i32> = sqlx::query_scalar(
        "SELECT seat_no FROM seatq.seats s WHERE event_id = $1 AND class = 3 AND price_cents = $2
           AND seat_no > (SELECT seat_no FROM seatq.seats WHERE event_id = s.event_id AND class = 3
                          AND price_cents = $2 ORDER BY seat_no OFFSET 4 LIMIT 1)
         FOR UPDATE",
    )
    .bind(ev)
    .bind(levels[0].0)
    .fetch_all(&mut *other)
    .await
    .unwrap();
    let dearest_first: Vec<i32> = sqlx::query_scalar(
        "SELECT seat_no FROM seatq.seats WHERE event_id = $1 AND class = 3 AND price_cents = $2
         ORDER BY seat_no LIMIT 35",
    )
    .bind(ev)
    .bind(levels[1].0)
    .fetch_all(&db.pool)
    .await
    .unwrap();

    // Whatever seat it starts at: the five free ones of the cheapest level,
    // then the next level from its head.
    for _ in 0..5 {
        let mut tx = db.pool.begin().await.unwrap();
        let got: Vec<(i32, i32)> =
            sqlx::query_as("SELECT seat_no, price_cents FROM seatq.lock_cheapest_spread($1, 3::smallint, 40)")
                .bind(ev)
                .fetch_all(&mut *tx)
                .await
                .unwrap();
        let mut cheap: Vec<i32> = got.iter().filter(|g| g.1 == levels[0].0).map(|g| g.0).collect();
        let mut dear: Vec<i32> = got.iter().filter(|g| g.1 == levels[1].0).map(|g| g.0).collect();
        cheap.sort();
        dear.sort();
        assert_eq!((cheap.len(), dear.len()), (5, 35), "{got:?}");
        assert!(cheap.iter().all(|s| !held.contains(s)), "{cheap:?}");
        assert_eq!(dear, dearest_first);
        tx.rollback().await.unwrap();
    }
    other.rollback().await.unwrap();
    assert_eq!(db.seats_taken(ev).await, 0, "locks only: nothing was taken");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn only_groups_of_spread_from_need_seats_or_more_take_the_spread_path() {
    use seatq_worker::sql::allocation::{LOCK_CHEAPEST, SPREAD_FROM_NEED};
    let (db, ev) = big_venue().await;
    // How often the statement calls the function, counted for this
    // transaction alone (pg_stat_xact_user_functions).
    async fn calls_for(db: &TestDb, event: i64, need: i32) -> (usize, i64) {
        let mut tx = db.pool.begin().await.unwrap();
        sqlx::query("SET LOCAL track_functions = 'pl'").execute(&mut *tx).await.unwrap();
        let rows = sqlx::query(LOCK_CHEAPEST)
            .bind(vec![event])
            .bind(vec![3i16])
            .bind(vec![need])
            .bind(SPREAD_FROM_NEED)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        let calls: Option<i64> = sqlx::query_scalar(
            "SELECT calls FROM pg_stat_xact_user_functions WHERE schemaname = 'seatq' AND funcname = 'lock_cheapest_spread'",
        )
        .fetch_optional(&mut *tx)
        .await
        .unwrap();
        tx.rollback().await.unwrap();
        let seats = rows.iter().filter(|r| sqlx::Row::get::<Option<i32>, _>(*r, "seat").is_some()).count();
        (seats, calls.unwrap_or(0))
    }
    assert_eq!(calls_for(&db, ev, SPREAD_FROM_NEED - 1).await, (SPREAD_FROM_NEED as usize - 1, 0));
    assert_eq!(calls_for(&db, ev, SPREAD_FROM_NEED).await, (SPREAD_FROM_NEED as usize, 1));
    assert_eq!(db.seats_taken(ev).await, 0, "locks only: nothing was taken");
    db.assert_invariants_and_close().await;
}

/// Statuses and states are read and bound as the schema's enum types, by
/// their qualified names, whether or not the session's search_path holds the
/// schema (PostgreSQL then names them without it).
#[tokio::test]
async fn statuses_and_states_map_to_the_enum_types_whatever_the_search_path() {
    use sqlx::ConnectOptions as _;
    let db = TestDb::new().await;
    for options in [db.options.clone(), db.options.clone().options([("search_path", "seatq, public")])] {
        let mut conn = options.connect().await.expect("connect");
        let status: Status = sqlx::query_scalar("SELECT $1::seatq.request_status")
            .bind(Status::Dead)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(status, Status::Dead);
        let states: Vec<BookingState> = sqlx::query_scalar("SELECT unnest($1::seatq.booking_state[])")
            .bind([BookingState::Held, BookingState::Expired])
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(states, [BookingState::Held, BookingState::Expired]);
        let seat: seatq::SeatState =
            sqlx::query_scalar("SELECT 'available'::seatq.seat_state").fetch_one(&mut conn).await.unwrap();
        assert_eq!(seat, seatq::SeatState::Available);
        sqlx::Connection::close(conn).await.unwrap();
    }
    db.close().await;
}
