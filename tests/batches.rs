//! Group bookings from Rust: several thousand parties against a small event,
//! waited for on one listening connection with batched reads, each outcome
//! carrying its line's ref back; a batch submitted again enqueues nothing
//! new and is answered from its recorded outcomes; a batch read back from
//! another client; a rerun after a crash enqueues only what is missing.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{TestDb, client_named, count_requests, sessions, wait_for_listener};
use futures_util::StreamExt as _;
use seatq::{Batch, Client, ErrorCode, PartyOutcome, PartyStatus, Retry, Submitted};

/// Party `n` of a tour operator's file as a JSON line: classes 1 to 3 in
/// turn, 1 to 9 seats, for customer `n`; every seventh without a ref.
fn party_line(event: i64, n: usize) -> String {
    let reference = if n % 7 == 3 { String::new() } else { format!("\"ref\": \"T-{n:05}\", ") };
    let (class, party) = (n % 3 + 1, n % 9 + 1);
    format!(
        r#"{{{reference}"kind": "book", "payload": {{"event": {event}, "class": {class}, "party": {party}, "customer": "customer {n}"}}}}"#
    )
}

/// The ref party `n` has in [`party_line`].
fn party_ref(n: usize) -> Option<String> {
    (n % 7 != 3).then(|| format!("T-{n:05}"))
}

/// A batch named `name` of these lines, read as a file.
fn batch_of(name: &str, lines: &[String]) -> Batch {
    let parsed = seatq::bulk::parse(lines.join("\n").as_bytes()).expect("parse");
    let batch = Batch::from_file(name, parsed).expect("batch");
    assert!(batch.bad().is_empty(), "{:?}", batch.bad());
    batch
}

/// Every outcome of a submitted batch, in line order (the test fails if they
/// do not all come within a few minutes).
async fn outcomes(client: &Client, batch: &Batch, submitted: &Submitted) -> Vec<PartyOutcome> {
    let stream = client.batch_outcomes(batch, submitted);
    let all = tokio::time::timeout(Duration::from_secs(600), stream.collect::<Vec<_>>()).await.expect("all outcomes");
    let mut all: Vec<PartyOutcome> = all.into_iter().map(|o| o.expect("outcome")).collect();
    all.sort_by_key(|o| o.line);
    all
}

/// Transactions committed in the test database so far (as far as the
/// statistics have been flushed).
async fn transactions(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
        .bind(&db.name)
        .fetch_one(&db.pool)
        .await
        .expect("transactions")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_parties_against_a_small_event() {
    const PARTIES: usize = 5000;
    let (db, ev) = TestDb::with_event("Small", 300, 6).await;
    let lines: Vec<String> = (0..PARTIES).map(|n| party_line(ev, n)).collect();
    let mut batch = batch_of("tour", &lines);
    let app = "batch-tour";
    let client = client_named(&db, app, 3).await;
    client.check_batch(&mut batch).await.expect("check");
    assert!(batch.bad().is_empty());
    let submitted = client.enqueue_batch(&batch, &Retry::NEVER).await.expect("enqueue");
    assert_eq!((submitted.ids.len(), submitted.enqueued), (PARTIES, PARTIES));
    assert_eq!(count_requests(&db).await, PARTIES as i64);

    let waiting = tokio::spawn({
        let (client, batch, submitted) = (client.clone(), batch_of("tour", &lines), submitted.clone());
        async move { outcomes(&client, &batch, &submitted).await }
    });
    wait_for_listener(&db, app).await;
    // While all of them wait: the pool's connections and one listener, and
    // a read now and then for all of them (a poll every 500 ms), not one a
    // request.
    let before = transactions(&db).await;
    let mut most = 0;
    for _ in 0..20 {
        most = most.max(sessions(&db, app).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reads = transactions(&db).await - before;
    assert!((1..=4).contains(&most), "{most} sessions for {PARTIES} parties waiting");
    assert!(reads < 200, "{reads} transactions while {PARTIES} parties waited");
    assert!(!waiting.is_finished(), "nobody is answered before the worker runs");

    db.drain().await;
    let all = waiting.await.expect("waiting task");
    assert_eq!(all.len(), PARTIES);
    let stored: HashMap<i64, (Option<String>, Option<i32>)> =
        sqlx::query_as("SELECT id, batch_ref, batch_line FROM seatq.requests WHERE batch = 'tour'")
            .fetch_all(&db.pool)
            .await
            .expect("stored refs")
            .into_iter()
            .map(|(id, r, l)| (id, (r, l)))
            .collect();
    let (mut booked, mut sold_out, mut seats) = (0u64, 0u64, 0usize);
    for (n, o) in all.iter().enumerate() {
        // The line's ref comes back with its outcome, and is the request's.
        assert_eq!(o.line, Some(n + 1), "{o:?}");
        assert_eq!(o.reference.as_deref(), party_ref(n).as_deref(), "line {}", n + 1);
        assert_eq!(o.id, Some(submitted.ids[n]));
        assert_eq!(stored.get(&submitted.ids[n]), Some(&(party_ref(n), Some(n as i32 + 1))));
        assert_eq!((o.event, o.class), (Some(ev), Some((n % 3 + 1) as i16)));
        match o.status {
            PartyStatus::Succeeded => {
                let b = o.booking.as_ref().expect("booking");
                assert_eq!(b.seats.len(), n % 9 + 1, "all of party {n}'s seats");
                assert!(b.seats.iter().all(|s| !s.label.is_empty() && s.class == (n % 3 + 1) as i16), "{b:?}");
                assert_eq!(b.total_cents, b.seats.iter().map(|s| i64::from(s.price_cents)).sum::<i64>());
                booked += 1;
                seats += b.seats.len();
            }
            _ => {
                assert_eq!((o.status, o.error_code.as_deref()), (PartyStatus::Failed, Some("sold_out")), "{o:?}");
                assert!(o.error_message.as_deref().is_some_and(|m| m.contains("left")), "{o:?}");
                sold_out += 1;
            }
        }
    }
    assert!(booked > 0 && sold_out > PARTIES as u64 / 2, "{booked} booked, {sold_out} sold out");
    assert_eq!(seats as i64, db.seats_taken(ev).await, "every seat taken is a party's");
    assert_eq!(seats as i64, db.seats_granted(ev).await);

    // Submitted again, from another client: nothing new, the same requests,
    // every outcome answered from the record (no worker runs now).
    let again = Client::connect(&db.url()).await.expect("second client");
    let mut resubmitted = batch_of("tour", &lines);
    again.check_batch(&mut resubmitted).await.expect("check");
    assert!(resubmitted.bad().is_empty());
    let second = again.enqueue_batch(&resubmitted, &Retry::NEVER).await.expect("enqueue again");
    assert_eq!(second, Submitted { ids: submitted.ids.clone(), enqueued: 0 });
    assert_eq!(count_requests(&db).await, PARTIES as i64, "nothing new enqueued");
    assert_eq!(outcomes(&again, &resubmitted, &second).await, all);

    // And read back from the database alone.
    let status = again.batch_status("tour").await.expect("status");
    let totals = &status.summary.total;
    assert_eq!((totals.parties, totals.booked, totals.sold_out), (PARTIES as u64, booked, sold_out));
    assert_eq!((totals.seats, totals.failed, totals.queued), (seats as u64, 0, 0));
    assert_eq!(status.summary.groups.len(), 3, "one group per class");
    assert!(status.summary.groups.iter().all(|g| g.event == Some(ev)));
    let results: Vec<PartyOutcome> = again.batch_results("tour").map(|o| o.expect("result")).collect::<Vec<_>>().await;
    assert_eq!(results, all);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_rerun_after_a_crash_enqueues_only_what_is_missing() {
    let (db, ev) = TestDb::with_event("Small", 60, 6).await;
    let lines: Vec<String> = (0..100).map(|n| party_line(ev, n)).collect();
    // The first run got as far as the first 40 lines.
    let first = db.client.enqueue_batch(&batch_of("rerun", &lines[..40]), &Retry::NEVER).await.expect("first run");
    assert_eq!(first.enqueued, 40);
    db.drain().await;

    let mut batch = batch_of("rerun", &lines);
    db.client.check_batch(&mut batch).await.expect("check");
    let submitted = db.client.enqueue_batch(&batch, &Retry::NEVER).await.expect("rerun");
    assert_eq!(submitted.enqueued, 60);
    assert_eq!(&submitted.ids[..40], &first.ids[..], "the first 40 keep their requests");
    assert_eq!(count_requests(&db).await, 100);
    db.drain().await;
    let all = outcomes(&db.client, &batch, &submitted).await;
    assert_eq!(all.len(), 100);
    assert!(all.iter().all(|o| matches!(o.status, PartyStatus::Succeeded | PartyStatus::Failed)));
    let seats: usize = all.iter().map(PartyOutcome::seats).sum();
    assert_eq!(seats as i64, db.seats_taken(ev).await);

    // A line whose ref was submitted with another party is refused, naming
    // the request, and the rest of the file goes on; a line without a ref
    // that changed is a new party.
    let mut changed = lines.clone();
    changed[5] = changed[5].replace("customer 5", "customer five");
    changed[3] = changed[3].replace("customer 3", "customer three");
    assert_eq!(party_ref(3), None);
    changed.push(party_line(ev, 100));
    let mut batch = batch_of("rerun", &changed);
    db.client.check_batch(&mut batch).await.expect("check");
    let bad: Vec<(usize, &str)> = batch.bad().iter().map(|b| (b.line, b.code.as_str())).collect();
    assert_eq!(bad, [(6, ErrorCode::IdempotencyConflict.as_str())]);
    let expected = format!("ref \"T-00005\" of batch \"rerun\" was first submitted as request {}", first.ids[5]);
    assert!(batch.bad()[0].reason.starts_with(&expected), "{:?}", batch.bad());
    let refused: Vec<PartyOutcome> = batch.refused().collect();
    assert_eq!(refused[0].reference.as_deref(), Some("T-00005"));
    let submitted = db.client.enqueue_batch(&batch, &Retry::NEVER).await.expect("changed file");
    assert_eq!(submitted.enqueued, 2, "line 4 changed and line 101 is new");
    assert_eq!(count_requests(&db).await, 102);
    db.drain().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_batch_built_in_code_waits_and_reads_back_by_name() {
    let (db, ev) = TestDb::with_event("Small", 20, 6).await;
    let mut batch = Batch::new("code").expect("name");
    let book = |class, party, customer: &str| seatq::Request::Book(seatq::SeatRequest::new(ev, class, party, customer));
    batch.push(Some("first".into()), book(1, 9, "ann")).expect("first");
    batch.push(Some("second".into()), book(1, 9, "bob")).expect("second");
    batch.push(Some("third".into()), book(1, 9, "cat")).expect("third: 19 seats in class 1");
    batch.push(None, book(2, 1, "dan")).expect("fourth");
    assert_eq!(batch.push(Some("first".into()), book(2, 1, "eve")).map_err(|e| e.code), Err(ErrorCode::DuplicateRef));
    let submitted = db.client.enqueue_batch(&batch, &Retry::NEVER).await.expect("enqueue");
    db.drain().await;
    let all = outcomes(&db.client, &batch, &submitted).await;
    let got: Vec<(Option<&str>, PartyStatus, Option<&str>)> =
        all.iter().map(|o| (o.reference.as_deref(), o.status, o.error_code.as_deref())).collect();
    assert_eq!(
        got,
        [
            (Some("first"), PartyStatus::Succeeded, None),
            (Some("second"), PartyStatus::Succeeded, None),
            (Some("third"), PartyStatus::Failed, Some("sold_out")),
            (None, PartyStatus::Succeeded, None),
        ]
    );
    let status = db.client.batch_status("code").await.expect("status");
    assert_eq!(status.summary.total.sold_out, 1);
    assert_eq!(status.summary.statuses.get("succeeded"), Some(&3));
    assert_eq!(status.summary.errors.get("sold_out"), Some(&1));
    assert!(db.client.batch_status("no such batch").await.expect("status").first_enqueued.is_none());
    db.assert_invariants_and_close().await;
}
