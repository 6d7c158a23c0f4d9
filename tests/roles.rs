//! Least privilege: a login in the producer role can enqueue and read
//! outcomes, and nothing else.

mod common;

use common::{TestDb, hold};
use seatq::{Client, Request, Status};
use sqlx::Row;

fn denied(result: Result<sqlx::postgres::PgQueryResult, sqlx::Error>, what: &str) {
    let err = result.expect_err(what);
    let code = seatq::sqlstate::code(&err);
    assert_eq!(
        code.as_deref(),
        Some(seatq::sqlstate::INSUFFICIENT_PRIVILEGE),
        "{what}: expected permission denied, got {err}"
    );
}

#[tokio::test]
async fn the_producer_role_can_enqueue_and_read_and_nothing_else() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let theirs = db.client.enqueue(Request::Hold(hold(ev, 1, 2, "ann"))).await.unwrap();
    db.drain().await;

    let login = db.login("seatq_producer").await;
    let pool = login.pool.clone();
    // Enqueue through the client (which sees the schema is current and does
    // not try to migrate), by the function, and by a plain INSERT.
    seatq::db::migrate(&pool).await.expect("a current schema needs no migration rights");
    let producer = Client::from_pool(pool.clone());
    let mine = producer.enqueue(Request::Book(hold(ev, 1, 1, "bob"))).await.unwrap();
    let by_fn: i64 = sqlx::query_scalar("SELECT seatq.enqueue('book', $1)")
        .bind(serde_json::json!({"event": ev, "class": 1, "party": 1, "customer": "cat"}))
        .fetch_one(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO seatq.requests (kind, payload) VALUES ('cancel', '{\"booking\": 1, \"customer\": \"x\"}')",
    )
    .execute(&pool)
    .await
    .unwrap();
    // It reads outcomes.
    let r = producer.status(theirs).await.unwrap();
    assert_eq!(r.status, Status::Succeeded);

    // And it can touch nothing else.
    denied(
        sqlx::query("UPDATE seatq.seats SET state = 'available', booking_id = NULL, held_until = NULL")
            .execute(&pool)
            .await,
        "update seats",
    );
    denied(sqlx::query("SELECT 1 FROM seatq.seats").execute(&pool).await, "read seats");
    denied(sqlx::query("UPDATE seatq.bookings SET customer = 'mallory'").execute(&pool).await, "update bookings");
    denied(sqlx::query("SELECT 1 FROM seatq.bookings").execute(&pool).await, "read bookings");
    denied(
        sqlx::query("UPDATE seatq.requests SET status = 'failed', error_code = 'x' WHERE id = $1")
            .bind(theirs)
            .execute(&pool)
            .await,
        "change another request's outcome",
    );
    denied(sqlx::query("DELETE FROM seatq.requests").execute(&pool).await, "delete requests");
    denied(
        sqlx::query(
            "INSERT INTO seatq.requests (kind, payload, status, result) VALUES ('book', '{}', 'succeeded', '{}')",
        )
        .execute(&pool)
        .await,
        "insert a request with a made-up outcome",
    );
    denied(sqlx::query("INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, request_id) VALUES (1, 'x', 'booked', '{1}', 0, 1)").execute(&pool).await, "insert bookings");

    login.drop(&db).await;

    // What it enqueued is processed normally by a worker.
    db.drain().await;
    db.assert_all_succeeded(&[mine, by_fn]).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_worker_role_can_run_a_worker_but_not_rewrite_inventory() {
    let (db, ev) = TestDb::with_event("E", 100, 6).await;
    let id = db.client.enqueue(Request::Hold(hold(ev, 1, 2, "ann"))).await.unwrap();
    // And enough parties for one class to take the spread path (`seatq.lock_cheapest_spread`, migrations/0004_allocation.sql).
    let party: Vec<seatq::NewRequest> =
        (0..12).map(|n| Request::Hold(hold(ev, 3, 3, &format!("p{n}"))).into()).collect();
    let ids = db.client.enqueue_many(&party).await.unwrap();

    let login = db.login("seatq_worker").await;
    let pool = login.pool.clone();
    seatq_worker::Worker::new(pool.clone(), seatq_worker::Config::default()).drain().await.unwrap();
    db.assert_all_succeeded(&[&ids[..], &[id]].concat()).await;
    seatq_worker::sweeper::sweep(&pool).await.unwrap();
    let row = sqlx::query("SELECT count(*) AS n FROM seatq.check_invariants()").fetch_one(&pool).await.unwrap();
    assert_eq!(row.get::<i64, _>("n"), 0);

    denied(sqlx::query("DELETE FROM seatq.seats").execute(&pool).await, "delete seats");
    denied(sqlx::query("INSERT INTO seatq.events (name) VALUES ('x')").execute(&pool).await, "create events");
    denied(sqlx::query("DELETE FROM seatq.bookings").execute(&pool).await, "delete bookings");
    denied(sqlx::query("UPDATE seatq.events SET name = 'x'").execute(&pool).await, "rename events");
    login.drop(&db).await;
    db.close().await;
}

#[tokio::test]
async fn the_producer_role_submits_a_batch_and_reads_it_back() {
    use futures_util::StreamExt as _;
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let login = db.login("seatq_producer").await;
    let producer = Client::from_pool(login.pool.clone());
    let batch = || {
        let mut batch = seatq::Batch::new("roles").unwrap();
        for (reference, party) in [("a", 9), ("b", 9), ("c", 9)] {
            batch.push(Some(reference.into()), Request::Book(hold(ev, 1, party, reference))).unwrap();
        }
        batch
    };
    let mut first = batch();
    producer.check_batch(&mut first).await.unwrap();
    let submitted = producer.enqueue_batch(&first, &seatq::client::Retry::NEVER).await.unwrap();
    assert_eq!(submitted.enqueued, 3);
    db.drain().await;
    let outcomes: Vec<_> = producer.batch_outcomes(&first, &submitted).map(Result::unwrap).collect().await;
    assert_eq!(outcomes.iter().filter(|o| o.error_code.as_deref() == Some("sold_out")).count(), 1);
    // Again: nothing new; and the batch read back, all with the producer's rights.
    let again = producer.enqueue_batch(&batch(), &seatq::client::Retry::NEVER).await.unwrap();
    assert_eq!((again.enqueued, &again.ids), (0, &submitted.ids));
    assert_eq!(producer.batch_status("roles").await.unwrap().summary.total.booked, 2);
    let results: Vec<_> = producer.batch_results("roles").map(Result::unwrap).collect().await;
    assert_eq!(results.iter().map(|o| o.reference.as_deref()).collect::<Vec<_>>(), [Some("a"), Some("b"), Some("c")]);
    login.drop(&db).await;
    db.assert_invariants_and_close().await;
}
