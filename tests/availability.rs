//! What a storefront reads: free seats and prices per class, and the seat
//! map (`seatq.availability`, `seatq.seat_map`, and the map in two parts,
//! `seatq.seat_layout` and `seatq.seat_states`), matching the seats' real
//! states after holds, bookings, a lapsed hold (free before any sweep) and a
//! cancel; readable by a producer login (so are `seatq event list` and
//! `show`, from the library and the command line), which still cannot read
//! seats or bookings; naming no customer and no booking. The client's cache of
//! availability: one read for page views at once, a view kept while young
//! and served old while a newer is read, the layout read once (again when
//! seats are added), a failed read's error shared.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{TestDb, eventually, hold};
use futures_util::future::join_all;
use seatq::{BookingRef, Client, Request, SeatAvailability, Status, ViewCacheStats};
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
    let cancel = db
        .run(Request::Cancel(BookingRef { event: None, booking: dan.booking, customer: "dan".into(), token: None }))
        .await;
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
        assert_eq!(c.prices.free_min_cents, free_prices.clone().min(), "class {}", c.class);
        assert_eq!(c.prices.free_max_cents, free_prices.max(), "class {}", c.class);
        assert_eq!(c.prices.min_cents, all_prices.clone().min().unwrap_or_default(), "class {}", c.class);
        assert_eq!(c.prices.max_cents, all_prices.max().unwrap_or_default(), "class {}", c.class);
    }
    // And by hand: ann holds 2 and bob booked 3 of class 1's 19 seats; eve
    // booked 1 of class 2's 30 (cat's 2 lapsed); dan's 4 of class 3 are back.
    let by_class: Vec<(i64, i64, i64, i64)> = summary.iter().map(|c| (c.seats, c.free, c.held, c.booked)).collect();
    assert_eq!(by_class, [(19, 14, 2, 3), (30, 29, 0, 1), (11, 11, 0, 0)]);
    assert_eq!((summary[0].prices.min_cents, summary[0].prices.max_cents), (75000, 90000));
    assert_eq!((summary[2].prices.free_min_cents, summary[2].prices.free_max_cents), (Some(12000), Some(15000)));

    // The map in two parts: the layout, and one row naming the seats that
    // are not free (the lapsed and cancelled ones are free); and the view a
    // storefront's cache makes of them, the same map and summary.
    let states = db.client.seat_states(ev).await.unwrap();
    let listed = |state: SeatAvailability| -> Vec<i32> {
        real.iter().filter(|(_, s)| s.2 == state).map(|(seat, _)| *seat).collect()
    };
    let sorted = |mut seats: Vec<i32>| {
        seats.sort();
        seats
    };
    assert_eq!(states.seats, 60);
    assert_eq!(sorted(states.held.clone()), listed(SeatAvailability::Held));
    assert_eq!(sorted(states.booked.clone()), listed(SeatAvailability::Booked));
    assert_eq!(states.not_for_sale, Vec::<i32>::new());
    let layout = db.client.seat_layout(ev).await.unwrap();
    assert_eq!(layout, map.iter().map(|s| s.layout.clone()).collect::<Vec<_>>());
    let view = db.client.clone().with_view_max_age(Duration::ZERO).cached_availability(ev).await.unwrap();
    assert_eq!(view.seat_map(), map);
    assert_eq!(view.classes(), summary.as_slice());

    // A sold-out class has no free price range; an unknown event has no rows.
    for party in [9, 2] {
        let rest = db.run(Request::Book(hold(ev, 3, party, "fay"))).await;
        assert_eq!(rest.status, Status::Succeeded, "{rest:?}");
    }
    let summary = db.client.availability(ev).await.unwrap();
    assert_eq!((summary[2].free, summary[2].prices.free_min_cents, summary[2].prices.free_max_cents), (0, None, None));
    assert!(db.client.availability(other + 100).await.unwrap().is_empty());
    assert!(db.client.seat_map(other + 100).await.unwrap().is_empty());
    assert!(db.client.seat_layout(other + 100).await.unwrap().is_empty());
    assert_eq!(db.client.seat_states(other + 100).await.unwrap(), seatq::SeatStates::default());
    let none = db.client.cached_availability(other + 100).await.unwrap();
    assert_eq!((none.seats().len(), none.classes().len()), (0, 0));

    // Nothing names a customer or a booking.
    let json = serde_json::to_string(&(&summary, &map, &states, &layout)).unwrap();
    for word in ["ann", "bob", "cat", "dan", "eve", "fay", "booking", "customer"] {
        assert!(!json.contains(word), "{word} in {json}");
    }
    for (function, columns) in [
        ("availability", "class,seats,free,held,booked,free_min_cents,free_max_cents,min_cents,max_cents"),
        ("seat_map", "seat_no,section,row_label,label,row_no,pos,class,price_cents,state"),
        ("seat_layout", "seat_no,section,row_label,label,row_no,pos,class,price_cents"),
        ("seat_states", "seats,held,booked,not_for_sale"),
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
async fn a_producer_login_reads_availability_and_lists_events_but_not_the_seats() {
    let (db, ev) = TestDb::with_event("E", 30, 6).await;
    db.run(Request::Hold(hold(ev, 1, 2, "ann"))).await.booking().expect("held");
    db.run(Request::Book(hold(ev, 2, 3, "bob"))).await.booking().expect("booked");

    let login = db.login("seatq_producer").await;
    let pool = login.pool.clone();
    let shop = Client::from_pool(pool.clone());

    assert_eq!(shop.availability(ev).await.unwrap(), db.client.availability(ev).await.unwrap());
    let map = db.client.seat_map(ev).await.unwrap();
    assert_eq!(shop.seat_map(ev).await.unwrap(), map);
    let taken = shop.seat_map(ev).await.unwrap().iter().filter(|s| s.state != SeatAvailability::Free).count();
    assert_eq!(taken, 5);
    // The map in two parts, and the cached view made of them.
    assert_eq!(shop.seat_layout(ev).await.unwrap(), db.client.seat_layout(ev).await.unwrap());
    assert_eq!(shop.seat_states(ev).await.unwrap(), db.client.seat_states(ev).await.unwrap());
    let view = shop.cached_availability(ev).await.expect("a producer's cache reads");
    assert_eq!(view.seat_map(), map);
    assert_eq!(view.classes(), db.client.availability(ev).await.unwrap().as_slice());

    // From the library: the counts of `seatq event list` and the groups of
    // `seatq event show`, through the availability functions.
    let events = shop.events(None).await.expect("a producer lists the events");
    let counts: Vec<(i64, i64, i64, i64, i64)> =
        events.iter().map(|e| (e.id, e.seats, e.free, e.taken, e.blocked)).collect();
    assert_eq!(counts, [(ev, 30, 25, 5, 0)]);
    assert_eq!(events[0].refusal, None, "on sale");
    let mut groups: Vec<(i16, SeatAvailability, i64)> = shop
        .seat_groups(ev)
        .await
        .expect("a producer shows an event")
        .iter()
        .map(|g| (g.class, g.state, g.seats))
        .collect();
    groups.sort_by_key(|&(class, state, _)| (class, state as u8));
    use SeatAvailability::{Booked, Free, Held};
    // Class 1 is seats 1-19, class 2 seats 20-30.
    assert_eq!(groups, [(1, Free, 17), (1, Held, 2), (2, Free, 8), (2, Booked, 3)]);

    // From the command line, logged in as the producer.
    let seatq = |args: &[&str]| {
        let out = std::process::Command::new(common::seatq_bin())
            .args(["--database-url", &login.url])
            .args(args)
            .output()
            .expect("run seatq");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "seatq {args:?}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
        stdout
    };
    let list = seatq(&["event", "list"]);
    assert!(list.contains("30 seats: 25 free, 5 taken, 0 not for sale"), "{list}");
    let shown: serde_json::Value =
        serde_json::from_str(&seatq(&["--json", "event", "show", &ev.to_string()])).expect("JSON");
    assert_eq!(shown["event"]["taken"], 5, "{shown}");
    let booked: Vec<&serde_json::Value> =
        shown["seats"].as_array().expect("groups").iter().filter(|g| g["state"] == "booked").collect();
    assert_eq!(booked.len(), 1, "{shown}");
    assert_eq!((booked[0]["class"].as_i64(), booked[0]["seats"].as_i64()), (Some(2), Some(3)), "{shown}");

    let err = sqlx::query("SELECT 1 FROM seatq.seats").execute(&pool).await.expect_err("the producer reads no seats");
    assert_eq!(seatq::sqlstate::code(&err).as_deref(), Some(seatq::sqlstate::INSUFFICIENT_PRIVILEGE), "{err}");
    // It reads only the bookings its own requests made: none of these.
    let bookings: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.bookings").fetch_one(&pool).await.unwrap();
    assert_eq!(bookings, 0, "another producer's bookings are not the storefront's to see");

    login.drop(&db).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn page_views_share_a_read_and_a_young_view() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    // A cache whose views stay young for the whole test.
    let shop = db.client.clone().with_view_max_age(Duration::from_secs(3600));
    // Twenty page views at once of an event not cached yet: one read, one
    // view for all.
    let views = join_all((0..20).map(|_| shop.cached_availability(ev))).await;
    let first = Arc::clone(views[0].as_ref().expect("a view"));
    assert!(views.iter().all(|v| v.as_ref().is_ok_and(|v| Arc::ptr_eq(v, &first))), "one view for all");
    assert_eq!(shop.view_cache_stats(), ViewCacheStats { waited: 20, shared: 19, reads: 1, ..Default::default() });
    assert_eq!(first.seat_map(), db.client.seat_map(ev).await.unwrap());

    // A booking: the young view does not show it (it may be this stale), an
    // exact read does.
    let booked = db.run(Request::Book(hold(ev, 1, 2, "ann"))).await.booking().expect("booked");
    let again = shop.cached_availability(ev).await.unwrap();
    assert!(Arc::ptr_eq(&again, &first), "served from the cache");
    assert_eq!(shop.view_cache_stats().fresh, 1);
    let exact = db.client.seat_map(ev).await.unwrap();
    for s in &booked.seats {
        assert_eq!(again.state_of(s.seat), Some(SeatAvailability::Free), "seat {}: the view's moment", s.seat);
        assert_eq!(exact[s.seat as usize - 1].state, SeatAvailability::Booked, "seat {}", s.seat);
    }

    // A cache that serves no view twice reads for every page view, but the
    // layout only once.
    let fresh = db.client.clone().with_view_max_age(Duration::ZERO);
    let v1 = fresh.cached_availability(ev).await.unwrap();
    let v2 = fresh.cached_availability(ev).await.unwrap();
    assert!(!Arc::ptr_eq(&v1, &v2), "two reads");
    assert!(Arc::ptr_eq(v1.layout(), v2.layout()), "one layout");
    assert_eq!(v2.seat_map(), exact);
    assert_eq!(v2.classes(), db.client.availability(ev).await.unwrap().as_slice());
    assert_eq!(fresh.view_cache_stats().reads, 2);

    // Seats added to the event (seeded again, larger): its layout is read
    // again, with the states, in one snapshot.
    db.client.add_event("E", 72, 6).await.unwrap();
    let v3 = fresh.cached_availability(ev).await.unwrap();
    assert!(!Arc::ptr_eq(v2.layout(), v3.layout()), "the layout read again");
    assert_eq!(v3.seats().len(), 72);
    assert_eq!(v3.seat_map(), db.client.seat_map(ev).await.unwrap());
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn an_old_view_is_served_while_a_newer_is_read() {
    let (db, ev) = TestDb::with_event("E", 30, 6).await;
    let max_age = Duration::from_secs(2);
    let shop = db.client.clone().with_view_max_age(max_age);
    let old = shop.cached_availability(ev).await.unwrap();
    let booked = db.run(Request::Book(hold(ev, 2, 3, "bob"))).await.booking().expect("booked");

    // Past the maximum age (and well before twice it): served at once,
    // while a newer view is read in the background.
    tokio::time::sleep(max_age.saturating_sub(old.age()) + Duration::from_millis(50)).await;
    let served = shop.cached_availability(ev).await.unwrap();
    assert!(Arc::ptr_eq(&served, &old), "the old view, without waiting");
    assert_eq!(shop.view_cache_stats().stale, 1);
    let newer = eventually(Duration::from_secs(10), || async {
        shop.cached_availability(ev).await.is_ok_and(|v| !Arc::ptr_eq(&v, &old))
    })
    .await;
    assert!(newer, "a newer view was read: {:?}", shop.view_cache_stats());
    let view = shop.cached_availability(ev).await.unwrap();
    for s in &booked.seats {
        assert_eq!(view.state_of(s.seat), Some(SeatAvailability::Booked), "seat {}", s.seat);
    }
    assert_eq!(view.seat_map(), db.client.seat_map(ev).await.unwrap());
    assert_eq!(shop.view_cache_stats().reads, 2, "the first read and the one in the background");
    db.assert_invariants_and_close().await;
}

/// The error shared by a page view's failed answer.
fn shared_error<T: std::fmt::Debug>(answer: &Result<T, seatq::Error>) -> &Arc<seatq::Error> {
    match answer {
        Err(seatq::Error::Shared(e)) => e,
        other => panic!("not the shared error: {other:?}"),
    }
}

#[tokio::test]
async fn page_views_waiting_for_a_failed_read_share_its_error() {
    let (db, ev) = TestDb::with_event("E", 30, 6).await;
    // A storefront whose reads give up on a lock after a moment, while the
    // seats are locked away from it: every read fails, but only after every
    // page view below has asked (a read failing at once could be over
    // before the others start, and they would get the kept error instead).
    let impatient = db.options.clone().options([("lock_timeout", "300ms")]);
    let shop =
        Client::from_pool(PgPool::connect_with(impatient).await.unwrap()).with_view_max_age(Duration::from_secs(3600));
    let mut locker = db.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE seatq.seats IN ACCESS EXCLUSIVE MODE").execute(&mut *locker).await.unwrap();
    let answers = join_all((0..10).map(|_| shop.cached_availability(ev))).await;
    for answer in &answers {
        let e = shared_error(answer);
        assert!(Arc::ptr_eq(e, shared_error(&answers[0])), "one error for all");
        match &**e {
            seatq::Error::Db(e) => {
                assert_eq!(seatq::sqlstate::code(e).as_deref(), Some(seatq::sqlstate::LOCK_NOT_AVAILABLE))
            }
            other => panic!("not a database error: {other:?}"),
        }
    }
    let stats = shop.view_cache_stats();
    assert_eq!(stats, ViewCacheStats { waited: 10, shared: 9, reads: 1, failed_reads: 1, ..Default::default() });
    // The error is kept as a view would be: the next page view gets it
    // without reading again.
    let kept = shop.cached_availability(ev).await;
    assert!(matches!(&kept, Err(seatq::Error::Shared(e)) if Arc::ptr_eq(e, shared_error(&answers[0]))), "{kept:?}");
    assert_eq!((shop.view_cache_stats().errors, shop.view_cache_stats().reads), (1, 1));
    // With no maximum age, every page view tries again.
    let eager = shop.clone().with_view_max_age(Duration::ZERO);
    for _ in 0..2 {
        assert!(eager.cached_availability(ev).await.is_err());
    }
    assert_eq!((eager.view_cache_stats().reads, eager.view_cache_stats().failed_reads), (2, 2));
    // Once the seats are free to read, so is the view.
    locker.rollback().await.unwrap();
    let view = eager.cached_availability(ev).await.unwrap();
    assert_eq!(view.seat_map(), db.client.seat_map(ev).await.unwrap());
    shop.pool().close().await;
    db.assert_invariants_and_close().await;
}
