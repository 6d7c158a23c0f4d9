//! A real venue: the sample theatre imported from its file, sold by class
//! and by named seats (labels in the result), seats not for sale never
//! allocated, broken files refused whole, sales windows and per-customer
//! limits.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{TestDb, code, hold, seatq_bin};
use seatq::venue::{self, NewEvent};
use seatq::{Request, SeatRequest, Status};

const THEATRE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/venues/theatre.csv");

/// Import the sample theatre as `event`; its id.
async fn theatre(db: &TestDb, event: NewEvent) -> i64 {
    let file = std::fs::File::open(THEATRE).expect("the sample theatre");
    let parsed = venue::parse_csv(std::io::BufReader::new(file)).expect("read");
    assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
    db.client.import_event(&event, &parsed.seats).await.expect("import")
}

fn named(name: &str) -> NewEvent {
    NewEvent { name: name.into(), venue: Some("The Playhouse".into()), ..NewEvent::default() }
}

/// The seat number of `section`, row `row`, seat `label`.
async fn seat_no(db: &TestDb, event: i64, section: &str, row: &str, label: &str) -> i32 {
    sqlx::query_scalar(
        "SELECT seat_no FROM seatq.seats WHERE event_id = $1 AND section = $2 AND row_label = $3 AND label = $4",
    )
    .bind(event)
    .bind(section)
    .bind(row)
    .bind(label)
    .fetch_one(&db.pool)
    .await
    .expect("seat")
}

fn book_named(event: i64, seats: Vec<i32>, customer: &str) -> Request {
    Request::Book(SeatRequest { seats, party: None, class: None, ..hold(event, 1, 1, customer) })
}

#[tokio::test]
async fn the_sample_theatre_sells_by_class_and_by_named_seat() {
    let db = TestDb::new().await;
    let ev = theatre(&db, named("Hamlet")).await;
    let states = db.client.seats_by_state(ev).await.unwrap();
    assert_eq!(states.get("available"), Some(&344));
    assert_eq!(states.get("blocked"), Some(&8));

    // Cheapest first in the circle's front rows (class 1).
    let done = db.run(Request::Book(SeatRequest { hold_seconds: None, ..hold(ev, 1, 2, "ann") })).await;
    let b = done.booking().unwrap_or_else(|| panic!("{done:?}"));
    let names: Vec<(&str, &str, &str)> =
        b.seats.iter().map(|s| (s.section.as_str(), s.row_label.as_str(), s.label.as_str())).collect();
    assert_eq!(names, [("Circle", "A", "1"), ("Circle", "A", "2")]);
    assert_eq!(b.total_cents, 12000);

    // Named: Circle, row C, seat 14.
    let c14 = seat_no(&db, ev, "Circle", "C", "14").await;
    let done = db.run(book_named(ev, vec![c14], "bob")).await;
    let b = done.booking().unwrap_or_else(|| panic!("{done:?}"));
    assert_eq!(
        (b.seats[0].section.as_str(), b.seats[0].row_label.as_str(), b.seats[0].label.as_str()),
        ("Circle", "C", "14")
    );
    assert_eq!(db.seat_states(ev, [c14]).await, ["booked"]);
    assert_eq!(db.seats_taken(ev).await, 3);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn seats_not_for_sale_are_never_allocated() {
    let db = TestDb::new().await;
    let ev = theatre(&db, named("Macbeth")).await;
    // The storefront's map names every seat as the venue does and shows the
    // file's eight seats not for sale as such.
    let map = db.client.seat_map(ev).await.expect("seat map");
    assert!(map.iter().all(|s| !s.section.is_empty() && !s.row_label.is_empty() && !s.label.is_empty()));
    let set_aside: Vec<String> = map
        .iter()
        .filter(|s| s.state == seatq::SeatAvailability::NotForSale)
        .map(|s| format!("{} {}{}", s.section, s.row_label, s.label))
        .collect();
    assert_eq!(set_aside.len(), 8, "{set_aside:?}");
    assert!(set_aside.contains(&"Stalls F10".to_string()), "{set_aside:?}");
    // Boxes (class 4): 16 seats, box D's 4 not for sale.
    let done = db.run(Request::Hold(hold(ev, 4, 9, "ann"))).await;
    assert_eq!(done.booking().map(|b| b.seats.len()), Some(9));
    let done = db.run(Request::Hold(hold(ev, 4, 4, "bob"))).await;
    assert_eq!(code(&done), "sold_out", "{done:?}");
    let done = db.run(Request::Hold(hold(ev, 4, 3, "bob"))).await;
    assert!(done.booking().unwrap().seats.iter().all(|s| s.row_label != "D"));
    let done = db.run(Request::Hold(SeatRequest { together: true, ..hold(ev, 4, 1, "cy") })).await;
    assert_eq!(code(&done), "no_adjacent_seats", "{done:?}");
    // Named: a house seat and a wheelchair space.
    let house = seat_no(&db, ev, "Stalls", "F", "10").await;
    let wheelchair = seat_no(&db, ev, "Stalls", "M", "W1").await;
    for seat in [house, wheelchair] {
        let done = db.run(book_named(ev, vec![seat], "dee")).await;
        assert_eq!(code(&done), "seat_not_for_sale", "{done:?}");
        assert_eq!(db.seat_states(ev, [seat]).await, ["blocked"]);
    }
    let states = db.client.seats_by_state(ev).await.unwrap();
    assert_eq!(states.get("blocked"), Some(&8));
    assert_eq!(db.seats_taken(ev).await, 12);
    // The storefront's compact read lists them as such, and its view of
    // the theatre is the exact map.
    assert_eq!(db.client.seat_states(ev).await.unwrap().not_for_sale.len(), 8);
    let view = db.client.clone().with_view_max_age(Duration::ZERO).cached_availability(ev).await.unwrap();
    assert_eq!(view.seat_map(), db.client.seat_map(ev).await.unwrap());
    assert_eq!(view.classes(), db.client.availability(ev).await.unwrap().as_slice());
    db.assert_invariants_and_close().await;
}

#[test]
fn broken_files_are_reported_by_line_and_nothing_is_kept() {
    const HEAD: &str = "section,row,seat,pos,class,price,for_sale\n";
    let good = "Stalls,A,1,1,1,40.00,yes\n";
    let cases = [
        ("section,row,seat,class,price,for_sale\nStalls,A,1,1,40,yes\n".to_string(), 1, "missing_column"),
        (format!("{HEAD}{good}Stalls,A,2,2,1,forty,yes\n"), 3, "invalid_price"),
        (format!("{HEAD}{good}Stalls,A,1,2,1,40,yes\n"), 3, "duplicate_seat"),
        (format!("{HEAD}{good}Stalls,A,2,-1,1,40,yes\n"), 3, "invalid_position"),
        (format!("{HEAD}{good}Stalls,A,2,1,1,40,yes\n"), 3, "duplicate_position"),
        (format!("{HEAD}{good},A,2,2,1,40,yes\n"), 3, "missing_field"),
        (format!("{HEAD}{good}Stalls,A,2,2,0,40,yes\n"), 3, "invalid_class"),
        (format!("{HEAD}{good}Stalls,A,2,2,1,40\n"), 3, "invalid_line"),
    ];
    for (file, line, want) in cases {
        let parsed = venue::parse_csv(file.as_bytes()).expect("parse");
        let bad: Vec<(usize, &str)> = parsed.bad.iter().map(|b| (b.line, b.code.as_str())).collect();
        assert_eq!(bad, [(line, want)], "{file}");
    }
}

#[tokio::test]
async fn a_quoted_section_name_is_imported_whole() {
    let db = TestDb::new().await;
    let file = "section,row,seat,pos,class,price,for_sale\n\
                \"Box A, left\",1,1,1,4,85.00,yes\n\"Box A, left\",1,2,2,4,85.00,no\nStalls,A,1,1,2,45,yes\n";
    let parsed = venue::parse_csv(file.as_bytes()).expect("read");
    assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
    let ev = db.client.import_event(&named("Boxes"), &parsed.seats).await.expect("import");
    let map = db.client.seat_map(ev).await.expect("seat map");
    let places: Vec<(&str, &str, &str, seatq::SeatAvailability)> =
        map.iter().map(|s| (s.section.as_str(), s.row_label.as_str(), s.label.as_str(), s.state)).collect();
    use seatq::SeatAvailability::{Free, NotForSale};
    assert_eq!(
        places,
        [("Box A, left", "1", "1", Free), ("Box A, left", "1", "2", NotForSale), ("Stalls", "A", "1", Free)]
    );
    let done = db.run(Request::Hold(hold(ev, 4, 1, "ann"))).await;
    let b = done.booking().unwrap_or_else(|| panic!("{done:?}"));
    assert_eq!(b.seats.iter().map(|s| s.place()).collect::<Vec<_>>(), ["Box A, left, row 1, seat 1"]);
    assert_eq!(code(&db.run(Request::Hold(hold(ev, 4, 1, "bob"))).await), "sold_out");
    assert_eq!(db.seats_taken(ev).await, 1);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_broken_file_imports_nothing_from_the_command_line() {
    let db = TestDb::new().await;
    let dir = std::env::temp_dir().join(format!("seatq-venue-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("broken.csv");
    std::fs::write(&file, "section,row,seat,pos,class,price,for_sale\nStalls,A,1,1,1,40,yes\nStalls,A,1,2,1,40,yes\n")
        .unwrap();
    let out = std::process::Command::new(seatq_bin())
        .args(["event", "import", "--name", "Broken", "--file"])
        .arg(&file)
        .env("DATABASE_URL", db.url())
        .output()
        .expect("seatq");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.csv:3: duplicate_seat:"), "{stderr}");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.events").fetch_one(&db.pool).await.unwrap();
    let seats: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.seats").fetch_one(&db.pool).await.unwrap();
    assert_eq!((events, seats), (0, 0));
    // The sample imports, all of it.
    let out = std::process::Command::new(seatq_bin())
        .args(["event", "import", "--name", "Lear", "--starts-at", "2099-01-01T19:30:00Z", "--file", THEATRE])
        .env("DATABASE_URL", db.url())
        .output()
        .expect("seatq");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seats: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.seats").fetch_one(&db.pool).await.unwrap();
    assert_eq!(seats, 352);
    std::fs::remove_dir_all(&dir).ok();
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn sales_open_and_close_with_the_window() {
    let db = TestDb::new().await;
    let now = Utc::now();
    let later = theatre(&db, NewEvent { sales_from: Some(now + chrono::Duration::hours(1)), ..named("Later") }).await;
    let over = theatre(&db, NewEvent { starts_at: Some(now - chrono::Duration::hours(1)), ..named("Over") }).await;
    let open = theatre(&db, named("Open")).await;
    assert_eq!(code(&db.run(Request::Hold(hold(later, 1, 2, "ann"))).await), "not_on_sale");
    let c1 = seat_no(&db, later, "Circle", "A", "1").await;
    assert_eq!(code(&db.run(book_named(later, vec![c1], "ann")).await), "not_on_sale");
    assert_eq!(code(&db.run(Request::Hold(hold(over, 1, 2, "ann"))).await), "sales_closed");
    assert_eq!(code(&db.run(book_named(over, vec![c1], "ann")).await), "sales_closed");
    assert_eq!(db.run(Request::Hold(hold(open, 1, 2, "ann"))).await.status, Status::Succeeded);
    assert_eq!(db.seats_taken(open).await, 2);
    assert!(db.client.close_event(open).await.unwrap());
    assert_eq!(code(&db.run(Request::Hold(hold(open, 1, 2, "bob"))).await), "sales_closed");
    // Closing ended ann's hold with the sales (a hold never outlives them).
    for ev in [later, over, open] {
        assert_eq!(db.seats_taken(ev).await, 0);
    }
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_customer_gets_no_more_than_the_limit() {
    let db = TestDb::new().await;
    let ev = theatre(&db, NewEvent { per_customer: Some(4), ..named("Limited") }).await;
    let first = db.client.enqueue(Request::Hold(hold(ev, 2, 3, "ann"))).await.unwrap();
    let second = db.client.enqueue(Request::Hold(hold(ev, 2, 2, "ann"))).await.unwrap();
    let other = db.client.enqueue(Request::Hold(hold(ev, 2, 4, "bob"))).await.unwrap();
    db.drain().await;
    let records = db.records(&[first, second, other]).await;
    assert_eq!(records[0].status, Status::Succeeded, "{:?}", records[0]);
    assert_eq!(code(&records[1]), "customer_limit_exceeded", "{:?}", records[1]);
    assert_eq!(records[2].status, Status::Succeeded, "{:?}", records[2]);
    // One more, named, fits; a second does not.
    let a1 = seat_no(&db, ev, "Circle", "F", "1").await;
    let a2 = seat_no(&db, ev, "Circle", "F", "2").await;
    assert_eq!(db.run(book_named(ev, vec![a1], "ann")).await.status, Status::Succeeded);
    assert_eq!(code(&db.run(book_named(ev, vec![a2], "ann")).await), "customer_limit_exceeded");
    // Her name in another case, width or spacing is her name: still over.
    for name in ["ANN", " ａｎｎ ", "Ann"] {
        assert_eq!(code(&db.run(book_named(ev, vec![a2], name)).await), "customer_limit_exceeded", "{name:?}");
    }
    assert_eq!(db.seats_taken(ev).await, 8);
    db.assert_invariants_and_close().await;
}

/// Only bookings of limited events carry the per-customer index's entry
/// (`limited`); an event given a limit afterwards counts what its customers
/// already have.
#[tokio::test]
async fn a_limit_set_after_bookings_counts_them() {
    let db = TestDb::new().await;
    let open = theatre(&db, named("Open")).await;
    let limited = theatre(&db, NewEvent { per_customer: Some(6), ..named("Limited from the start") }).await;
    assert_eq!(db.run(Request::Hold(hold(open, 2, 3, "ann"))).await.status, Status::Succeeded);
    assert_eq!(db.run(Request::Hold(hold(limited, 2, 3, "ann"))).await.status, Status::Succeeded);
    let flags: Vec<(i64, bool)> = sqlx::query_as("SELECT event_id, limited FROM seatq.bookings ORDER BY event_id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(flags, vec![(open, false), (limited, true)]);

    sqlx::query("UPDATE seatq.events SET per_customer = 4 WHERE id = $1").bind(open).execute(&db.pool).await.unwrap();
    // ann has 3 there already: 2 more would be 5.
    assert_eq!(code(&db.run(Request::Hold(hold(open, 2, 2, "ann"))).await), "customer_limit_exceeded");
    assert_eq!(db.run(Request::Hold(hold(open, 2, 1, "ann"))).await.status, Status::Succeeded);
    assert_eq!(db.run(Request::Hold(hold(open, 2, 4, "bob"))).await.status, Status::Succeeded);
    let unlimited: i64 =
        sqlx::query_scalar("SELECT count(*) FROM seatq.bookings WHERE NOT limited").fetch_one(&db.pool).await.unwrap();
    assert_eq!(unlimited, 0);
    assert_eq!(db.seats_taken(open).await, 8);
    assert_eq!(db.seats_taken(limited).await, 3);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_hold_never_outlives_the_sales_window() {
    let db = TestDb::new().await;
    let end = Utc::now() + chrono::Duration::seconds(120);
    let ev = theatre(&db, NewEvent { sales_until: Some(end), ..named("Soon") }).await;
    let mut r = hold(ev, 3, 2, "ann");
    r.hold_seconds = Some(3600);
    let done = db.run(Request::Hold(r)).await;
    let b = done.booking().unwrap_or_else(|| panic!("{done:?}"));
    let until: DateTime<Utc> = b.held_until.expect("held");
    assert!((until - end).num_milliseconds().abs() < 5, "{until} vs {end}");
    // Extending cannot pass it either.
    let ext = seatq::HoldExtension {
        event: None,
        booking: b.booking,
        customer: "ann".into(),
        hold_seconds: Some(3600),
        token: None,
    };
    let done = db.run(Request::Extend(ext)).await;
    let e = done.booking().unwrap_or_else(|| panic!("{done:?}"));
    assert!(e.capped);
    assert!((e.held_until.unwrap() - end).num_milliseconds().abs() < 5);
    tokio::time::sleep(Duration::from_millis(1)).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_hold_is_not_lengthened_once_its_event_is_closed() {
    let db = TestDb::new().await;
    let ev = theatre(&db, named("Closing")).await;
    let mut r = hold(ev, 3, 2, "ann");
    r.hold_seconds = Some(60);
    let done = db.run(Request::Hold(r)).await;
    let b = done.booking().unwrap_or_else(|| panic!("{done:?}"));
    assert!(db.client.close_event(ev).await.unwrap(), "closed");

    // Closing ended the hold with the sales: there is nothing to lengthen.
    let ext = seatq::HoldExtension {
        event: None,
        booking: b.booking,
        customer: "ann".into(),
        hold_seconds: Some(3600),
        token: None,
    };
    let done = db.run(Request::Extend(ext)).await;
    assert_eq!(code(&done), "hold_expired", "{done:?}");
    assert_eq!(db.seats_taken(ev).await, 0);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn an_event_time_must_be_finite() {
    let db = TestDb::new().await;
    // Straight SQL, as an operator might write "no end": refused, naming the
    // field, whichever time and either infinity.
    for (sql, field) in [
        ("INSERT INTO seatq.events (name, starts_at) VALUES ('E', 'infinity')", "starts_at"),
        ("INSERT INTO seatq.events (name, sales_from) VALUES ('E', '-infinity')", "sales_from"),
        ("INSERT INTO seatq.events (name, sales_until) VALUES ('E', 'infinity')", "sales_until"),
        ("INSERT INTO seatq.events (name, closed_at) VALUES ('E', 'infinity')", "closed_at"),
    ] {
        let refused = seatq::Error::from(sqlx::query(sql).execute(&db.pool).await.expect_err(sql));
        assert_eq!(refused.code(), "time_not_finite", "{sql}: {refused}");
        assert!(refused.to_string().starts_with(&format!("{field}: must be a finite time")), "{sql}: {refused}");
    }
    // The normal paths: times given, and none (NULL); closing; reading back.
    let starts = DateTime::parse_from_rfc3339("2030-01-01T19:30:00Z").expect("a time").with_timezone(&Utc);
    let timed = theatre(&db, NewEvent { starts_at: Some(starts), sales_until: Some(starts), ..named("Timed") }).await;
    let open = theatre(&db, named("Open")).await;
    // Nor may an update make a time infinite.
    let refused = sqlx::query("UPDATE seatq.events SET sales_until = 'infinity' WHERE id = $1")
        .bind(timed)
        .execute(&db.pool)
        .await
        .expect_err("an infinite end");
    assert_eq!(seatq::Error::from(refused).code(), "time_not_finite");
    assert!(db.client.close_event(open).await.unwrap());
    let events = db.client.events(None).await.expect("every event reads back");
    let read: Vec<_> =
        events.iter().map(|e| (e.name.as_str(), e.starts_at, e.sales_until, e.closed_at.is_some())).collect();
    assert_eq!(read, [("Timed", Some(starts), Some(starts), false), ("Open", None, None, true)]);
    assert_eq!(db.run(Request::Hold(hold(timed, 1, 2, "ann"))).await.status, Status::Succeeded);
    assert_eq!(db.seats_taken(timed).await, 2);
    db.assert_invariants_and_close().await;
}
