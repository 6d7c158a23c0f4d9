//! A box office's events: importing refused with a clear code (a name taken,
//! sales that close before they open, no seats), closing sales (live holds
//! lapse with them), correcting an event (rename, move its sales window) and
//! deleting one made by mistake; and `seatq` printing into a pipe whose
//! reader has gone.

mod common;

use std::process::{Command, Stdio};

use chrono::{Duration as Span, Utc};
use common::{TestDb, code, hold, seatq_bin};
use seatq::venue::{NewEvent, VenueSeat};
use seatq::{BookingRef, EventChanges, Request, SeatRequest, Status};

fn seats(n: i32) -> Vec<VenueSeat> {
    (1..=n)
        .map(|k| VenueSeat {
            section: "Stalls".into(),
            row_label: "A".into(),
            label: k.to_string(),
            pos: k,
            class: 1,
            price_cents: 4000,
            for_sale: true,
        })
        .collect()
}

fn refusal(result: Result<impl std::fmt::Debug, seatq::Error>) -> (String, String) {
    match result {
        Err(e) => (e.code().to_string(), e.to_string()),
        Ok(v) => panic!("accepted: {v:?}"),
    }
}

#[tokio::test]
async fn imports_that_cannot_stand_are_refused_with_their_own_code() {
    let db = TestDb::new().await;
    let event = NewEvent { name: "Hamlet".into(), ..NewEvent::default() };
    let first = db.client.import_event(&event, &seats(4)).await.unwrap();

    let (code, message) = refusal(db.client.import_event(&event, &seats(4)).await);
    assert_eq!(code, "event_exists");
    assert_eq!(message, format!("name: an event named \"Hamlet\" exists already (event {first})"));

    let reversed = NewEvent {
        name: "Othello".into(),
        sales_from: Some(Utc::now() + Span::days(2)),
        sales_until: Some(Utc::now() + Span::days(1)),
        ..NewEvent::default()
    };
    let (code, message) = refusal(db.client.import_event(&reversed, &seats(4)).await);
    assert_eq!(code, "invalid_event");
    assert!(message.starts_with("sales_until: sales would close"), "{message}");

    let (code, _) = refusal(db.client.import_event(&NewEvent { name: "Lear".into(), ..event.clone() }, &[]).await);
    assert_eq!(code, "invalid_event", "no seats");

    // Written by SQL, a reversed window is refused by the database's own check.
    let by_sql = sqlx::query(
        "INSERT INTO seatq.events (name, sales_from, sales_until) VALUES ('Macbeth', now() + interval '2 days', now())",
    )
    .execute(&db.pool)
    .await;
    let (code, _) = refusal(by_sql.map_err(seatq::Error::from));
    assert_eq!(code, "invalid_event");

    let names: Vec<String> = db.client.events(None).await.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["Hamlet"], "nothing of the refused imports was written");
    db.assert_invariants_and_close().await;
}

/// docs/requests.md: a hold never outlives its event's sales. Closing them
/// lapses the holds already made: their confirm is `hold_expired` and their
/// seats are free to the storefront (none can sell them: sales are closed).
#[tokio::test]
async fn closing_sales_lapses_the_holds_already_made() {
    let (db, ev) = TestDb::with_event("E", 12, 6).await;
    let held = db.run(Request::Hold(hold(ev, 1, 2, "ann"))).await;
    let booking = held.booking().expect("held").booking;
    let booked = db.run(Request::Book(hold(ev, 1, 2, "bob"))).await;
    assert_eq!(booked.status, Status::Succeeded, "{booked:?}");
    let free_before: i64 = db.client.availability(ev).await.unwrap().iter().map(|c| c.free).sum();

    assert!(db.client.close_event(ev).await.unwrap());
    let free_after: i64 = db.client.availability(ev).await.unwrap().iter().map(|c| c.free).sum();
    assert_eq!(free_after, free_before + 2, "the hold's seats are free at once (passive expiry)");

    let r = db.run(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(code(&r), "hold_expired", "{r:?}");
    let r = db.run(Request::Hold(hold(ev, 1, 2, "cat"))).await;
    assert_eq!(code(&r), "sales_closed", "{r:?}");
    assert_eq!(db.seats_taken(ev).await, 2, "the booking stands; the hold is gone");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn an_event_can_be_renamed_and_its_sales_window_moved() {
    let (db, ev) = TestDb::with_event("Flight 1", 12, 6).await;
    db.client.add_event("Flight 2", 6, 6).await.unwrap();
    let held = db.run(Request::Hold(SeatRequest { hold_seconds: Some(3600), ..hold(ev, 1, 2, "ann") })).await;
    let booking = held.booking().expect("held").booking;

    let rename = EventChanges { name: Some("Flight 1A".into()), ..EventChanges::default() };
    assert!(db.client.edit_event(ev, &rename).await.unwrap());
    let taken = EventChanges { name: Some("Flight 2".into()), ..EventChanges::default() };
    let (code, message) = refusal(db.client.edit_event(ev, &taken).await);
    assert_eq!(code, "event_exists");
    assert_eq!(message, format!("name: an event named \"Flight 2\" exists already (event {})", ev + 1));
    let reversed = EventChanges {
        sales_from: Some(Utc::now() + Span::days(2)),
        sales_until: Some(Utc::now() + Span::days(1)),
        ..EventChanges::default()
    };
    assert_eq!(refusal(db.client.edit_event(ev, &reversed).await).0, "invalid_event");
    assert!(!db.client.edit_event(ev + 1000, &rename).await.unwrap(), "no such event");

    // Sales now end in a minute: the hour-long hold is cut to it.
    let until = Utc::now() + Span::minutes(1);
    let window = EventChanges { sales_until: Some(until), ..EventChanges::default() };
    assert!(db.client.edit_event(ev, &window).await.unwrap());
    let e = db.client.events(Some(ev)).await.unwrap().pop().unwrap();
    assert_eq!(e.name, "Flight 1A");
    assert_eq!(e.sales_until.map(|t| t.timestamp_micros()), Some(until.timestamp_micros()));
    let (held_until, seats_until): (chrono::DateTime<Utc>, Vec<chrono::DateTime<Utc>>) = sqlx::query_as(
        "SELECT b.held_until, array_agg(s.held_until) FROM seatq.bookings b
         JOIN seatq.seats s ON s.booking_id = b.id WHERE b.id = $1 GROUP BY b.held_until",
    )
    .bind(booking)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(held_until.timestamp_micros(), until.timestamp_micros(), "the hold ends with the sales");
    assert!(seats_until.iter().all(|t| *t == held_until), "and its seats with it: {seats_until:?}");
    let r = db.run(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(r.status, Status::Succeeded, "still live until then: {r:?}");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn only_an_event_nobody_booked_can_be_deleted() {
    let db = TestDb::new().await;
    let mistake = db.client.import_event(&NewEvent { name: "Test".into(), ..NewEvent::default() }, &seats(5)).await;
    let mistake = mistake.unwrap();
    let used = db.client.add_event("Used", 6, 6).await.unwrap();
    let r = db.run(Request::Hold(hold(used, 1, 1, "ann"))).await;
    let booking = r.booking().expect("held").booking;
    db.run(Request::Cancel(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;

    assert!(db.client.delete_event(mistake).await.unwrap());
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.seats WHERE event_id = $1")
        .bind(mistake)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "its seats went with it");
    assert!(!db.client.delete_event(mistake).await.unwrap(), "gone");

    let (code, message) = refusal(db.client.delete_event(used).await);
    assert_eq!(code, "event_in_use", "a cancelled booking is history: {message}");
    let queued = db.client.add_event("Queued", 6, 6).await.unwrap();
    db.client.enqueue(Request::Hold(hold(queued, 1, 1, "bob"))).await.unwrap();
    assert_eq!(refusal(db.client.delete_event(queued).await).0, "event_in_use", "a request for it waits");
    let names: Vec<String> = db.client.events(None).await.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["Used", "Queued"]);
    db.drain().await;
    db.assert_invariants_and_close().await;
}

/// `seatq … | head -3`: the reader goes away; the command ends quietly with
/// status 0 (it used to panic, status 101).
#[tokio::test]
async fn printing_into_a_closed_pipe_ends_the_command_quietly() {
    let (db, ev) = TestDb::with_event("E", 600, 20).await;
    let event = ev.to_string();
    for args in [
        vec!["availability", "--event", &event, "--seats"],
        vec!["--json", "availability", "--event", &event],
        vec!["event", "list"],
    ] {
        let mut child = Command::new(seatq_bin())
            .arg("--database-url")
            .arg(db.url())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start seatq");
        // The reader is gone before the first line.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("seatq ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    db.assert_invariants_and_close().await;
}
