//! The queue itself: idempotent enqueue, NOTIFY wake-ups. (Malformed rows: tests/validation.rs.)

mod common;

use std::time::Duration;

use common::{Running, TestDb, hold};
use seatq::{NewRequest, Request, Status};
use seatq_worker::Config;

#[tokio::test]
async fn enqueue_with_the_same_key_returns_the_first_request() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let ann = Request::Book(hold(ev, 1, 2, "ann"));
    let new = NewRequest { idempotency_key: Some("k1".into()), ..ann.clone().into() };
    let first = db.client.enqueue(new.clone()).await.unwrap();
    let again = db.client.enqueue(new.clone()).await.unwrap();
    assert_eq!(first, again);
    // The SQL interface behaves the same (the same kind and payload: another
    // would be an idempotency conflict, see tests/storefront.rs).
    let by_sql: i64 = sqlx::query_scalar("SELECT seatq.enqueue('book', $1, 'k1')")
        .bind(ann.payload())
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(by_sql, first);
    let other = db.client.enqueue(NewRequest { idempotency_key: Some("k2".into()), ..new }).await.unwrap();
    assert_ne!(other, first);

    let batch = db
        .client
        .enqueue_many(&[
            NewRequest { idempotency_key: Some("k2".into()), ..ann.into() },
            NewRequest { idempotency_key: Some("k3".into()), ..Request::Book(hold(ev, 1, 1, "cat")).into() },
        ])
        .await
        .unwrap();
    assert_eq!(batch[0], other);
    assert_ne!(batch[1], other);

    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.requests").fetch_one(&db.pool).await.unwrap();
    assert_eq!(rows, 3);
    db.drain().await;
    assert_eq!(db.seats_taken(ev).await, 2 + 2 + 1, "each request booked once");
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn running_workers_wake_on_notify_and_wake_the_waiting_client() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    // A poll interval far longer than the wait's timeout: only NOTIFY can
    // get the request processed in time.
    let config = Config { poll_interval: Duration::from_secs(3600), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // let the listener subscribe
    let id = db.client.enqueue(Request::Hold(hold(ev, 1, 1, "ann"))).await.unwrap();
    let r = db.client.wait(id, Some(Duration::from_secs(60))).await.unwrap();
    assert_eq!(r.status, Status::Succeeded);
    workers.stop().await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn many_concurrent_waits_do_not_exhaust_the_clients_pool() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    // A client with a two-connection pool, and six callers waiting at once.
    let small = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let client = seatq::Client::from_pool(small);
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(client.enqueue(Request::Book(hold(ev, 1, 1, &format!("c{n}")))).await.unwrap());
    }
    let waits: Vec<_> = ids
        .iter()
        .map(|id| {
            let client = client.clone();
            let id = *id;
            tokio::spawn(async move { client.wait(id, Some(Duration::from_secs(60))).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.drain().await;
    for w in waits {
        assert_eq!(w.await.unwrap().expect("wait").status, Status::Succeeded);
    }
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn requests_left_over_by_a_full_batch_are_processed_at_once() {
    let (db, ev) = TestDb::with_event("E", 60, 6).await;
    // Each named-seat request takes a savepoint of its own, so one batch does
    // at most MAX_SAVEPOINTS of them and leaves the rest queued. With a poll
    // interval far longer than the wait's timeout and no NOTIFY after the
    // first, only the loop going straight on gets them done in time.
    let config = Config { concurrency: 1, poll_interval: Duration::from_secs(3600), ..Config::default() };
    let workers = Running::start(&db, 1, config).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // let the listener subscribe
    let n = seatq_worker::batch::MAX_SAVEPOINTS as i32 + 8;
    let batch: Vec<NewRequest> = (1..=n)
        .map(|seat| NewRequest::from(Request::Book(seatq::SeatRequest::named(ev, vec![seat], format!("c{seat}")))))
        .collect();
    let ids = db.client.enqueue_all(&batch, &seatq::Retry::NEVER).await.unwrap();
    db.client.wait_all(&ids, Some(Duration::from_secs(60))).await.expect("every request finished");
    db.assert_all_succeeded(&ids).await;
    assert_eq!(db.seats_taken(ev).await, n as i64);
    workers.stop().await;
    db.assert_invariants_and_close().await;
}
