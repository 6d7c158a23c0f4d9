//! The contention path of the core algorithm (docs/design.md): seats that
//! an in-flight transaction locks are contention, retried and then requeued,
//! never `sold_out` or `seats_taken`; only an event that is short by
//! committed state, with nothing locked, is `sold_out`.

mod common;

use common::{TestDb, code, hold};
use seatq::{Request, RequestRecord, SeatRequest, Status};
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Transaction};

/// A test database with one event of five seats, all of class 1.
async fn five_seats() -> (TestDb, i64) {
    TestDb::with_event("Five", 5, 6).await
}

/// From a connection of its own, open a transaction that locks these seats
/// (as an in-flight booking would), and keep it open.
async fn lock_seats<'c>(conn: &'c mut PgConnection, event: i64, seats: &[i32]) -> Transaction<'c, sqlx::Postgres> {
    let mut tx = conn.begin().await.unwrap();
    let locked: Vec<i32> =
        sqlx::query_scalar("SELECT seat_no FROM seatq.seats WHERE event_id = $1 AND seat_no = ANY($2) FOR UPDATE")
            .bind(event)
            .bind(seats)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    assert_eq!(locked.len(), seats.len());
    tx
}

/// Make a requeued request due again at once (the requeue delay is 200 ms).
async fn make_due(db: &TestDb, id: i64) {
    sqlx::query("UPDATE seatq.requests SET run_at = now() WHERE id = $1").bind(id).execute(&db.pool).await.unwrap();
}

/// Still queued, not failed, after contention retries, with a later run_at.
fn assert_requeued_after_contention(r: &RequestRecord) {
    assert_eq!((r.status, r.error_code.as_deref()), (Status::Queued, None), "contention is not a failure: {r:?}");
    assert!(r.contention_retries > 0, "counted as contention: {r:?}");
    assert_eq!(r.attempts, 0, "contention is not a failed attempt: {r:?}");
    assert!(r.run_at > r.created_at, "requeued for later: {r:?}");
}

/// The other transaction gives its seats back: the requeued request `r`, made
/// due again, now succeeds. Returns it finished.
async fn release_and_retry(db: &TestDb, locker: Transaction<'_, sqlx::Postgres>, r: &RequestRecord) -> RequestRecord {
    locker.rollback().await.unwrap();
    make_due(db, r.id).await;
    db.drain().await;
    let done = db.client.status(r.id).await.unwrap();
    assert_eq!(done.status, Status::Succeeded, "once the locker is gone: {done:?}");
    done
}

fn seats_of(r: &RequestRecord) -> Vec<i32> {
    r.booking().expect("a booking result").seats.iter().map(|s| s.seat).collect()
}

#[tokio::test]
async fn seats_locked_by_another_transaction_are_contention_not_sold_out() {
    let (db, ev) = five_seats().await;
    // Three of five seats locked elsewhere: two free ones are fewer than the party of three.
    let mut conn = PgConnection::connect_with(&db.options).await.unwrap();
    let locker = lock_seats(&mut conn, ev, &[1, 2, 3]).await;

    let r = db.run(Request::Book(hold(ev, 1, 3, "ann"))).await;
    assert_requeued_after_contention(&r);
    assert_eq!(db.seats_taken(ev).await, 0, "no seats while contended: all or nothing");

    // The other transaction gives its seats back: now the party fits.
    let done = release_and_retry(&db, locker, &r).await;
    assert_eq!(seats_of(&done).len(), 3);
    assert!(done.contention_retries >= r.contention_retries, "{done:?}");
    assert_eq!(db.seats_taken(ev).await, 3);
    conn.close().await.unwrap();
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_named_seat_locked_by_another_transaction_is_contention_not_seats_taken() {
    let (db, ev) = five_seats().await;
    let mut conn = PgConnection::connect_with(&db.options).await.unwrap();
    let locker = lock_seats(&mut conn, ev, &[2]).await;

    let r = db.run(Request::Book(SeatRequest::named(ev, vec![2, 3], "bob"))).await;
    assert_requeued_after_contention(&r);
    assert_eq!(db.seats_taken(ev).await, 0, "not even the free seat 3: all or nothing");

    let done = release_and_retry(&db, locker, &r).await;
    assert_eq!(seats_of(&done), [2, 3]);
    conn.close().await.unwrap();
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_side_by_side_party_whose_best_block_is_held_elsewhere_takes_the_next_or_waits() {
    // Two rows of six, all class 1: seats 10-12 (row 2) are the cheapest.
    let (db, ev) = TestDb::with_event("Twelve", 12, 6).await;
    let side_by_side = |event, party, customer| {
        let mut r = hold(event, 1, party, customer);
        r.together = true;
        Request::Book(r)
    };
    let mut conn = PgConnection::connect_with(&db.options).await.unwrap();
    // The cheapest block, 10-12, is partly held: the next best is 8-10.
    let locker = lock_seats(&mut conn, ev, &[11]).await;
    let r = db.run(side_by_side(ev, 3, "ann")).await;
    assert_eq!(seats_of(&r), [8, 9, 10], "{r:?}");
    locker.rollback().await.unwrap();

    // One row of six: every block of four has seat 3 or 4. With both held
    // elsewhere, the party waits, never refused.
    let row = db.client.add_event("Six", 6, 6).await.unwrap();
    let locker = lock_seats(&mut conn, row, &[3, 4]).await;
    let r = db.run(side_by_side(row, 4, "bob")).await;
    assert_requeued_after_contention(&r);
    assert_eq!(db.seats_taken(row).await, 0, "nothing taken while contended");
    let done = release_and_retry(&db, locker, &r).await;
    assert_eq!(seats_of(&done), [1, 2, 3, 4]);
    assert_eq!(db.seats_taken(row).await, 4);
    conn.close().await.unwrap();
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_genuinely_short_event_is_sold_out_at_once_or_partial() {
    let (db, ev) = five_seats().await;
    assert_eq!(seats_of(&db.run(Request::Book(hold(ev, 1, 3, "ann"))).await).len(), 3);

    // Nothing locked, two seats left: sold out at once, saying how many are left.
    let r = db.run(Request::Book(hold(ev, 1, 3, "bob"))).await;
    assert_eq!((r.status, code(&r)), (Status::Failed, "sold_out"), "{r:?}");
    assert_eq!(
        r.error_message.as_deref(),
        Some(format!("2 seat(s) of class 1 left on event {ev}, 3 requested").as_str())
    );
    assert_eq!(r.contention_retries, 0, "no retries when nothing is locked: {r:?}");
    assert_eq!(db.seats_taken(ev).await, 3);

    // With partial, what is left.
    let mut partial = hold(ev, 1, 3, "cat");
    partial.partial = true;
    let r = db.run(Request::Book(partial)).await;
    assert_eq!(r.status, Status::Succeeded, "{r:?}");
    assert_eq!(seats_of(&r).len(), 2, "the two seats left");
    assert_eq!(r.contention_retries, 0);
    assert_eq!(db.seats_taken(ev).await, 5);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_customer_another_batch_is_booking_for_on_a_limited_event_is_contention() {
    let (db, ev) = five_seats().await;
    sqlx::query("UPDATE seatq.events SET per_customer = 2 WHERE id = $1").bind(ev).execute(&db.pool).await.unwrap();
    // Another transaction holds ann's customer lock on the event, as a batch
    // booking for her does until it commits: her seats cannot be counted yet.
    let mut conn = PgConnection::connect_with(&db.options).await.unwrap();
    let mut locker = conn.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(seatq.customer_lock($1, current_user, 'ann'))")
        .bind(ev)
        .execute(&mut *locker)
        .await
        .unwrap();

    let cheapest = db.run(Request::Book(hold(ev, 1, 1, "ann"))).await;
    assert_requeued_after_contention(&cheapest);
    let named = db.run(Request::Book(SeatRequest::named(ev, vec![5], "ann"))).await;
    assert_requeued_after_contention(&named);
    assert_eq!(db.seats_taken(ev).await, 0, "nothing booked for ann while her seats cannot be counted");
    let bob = db.run(Request::Book(hold(ev, 1, 1, "bob"))).await;
    assert_eq!(bob.status, Status::Succeeded, "another customer is not held up: {bob:?}");

    release_and_retry(&db, locker, &cheapest).await;
    make_due(&db, named.id).await;
    db.drain().await;
    let named = db.client.status(named.id).await.unwrap();
    assert_eq!(seats_of(&named), [5], "{named:?}");
    assert_eq!(db.seats_taken(ev).await, 3);
    conn.close().await.unwrap();
    db.assert_invariants_and_close().await;
}
