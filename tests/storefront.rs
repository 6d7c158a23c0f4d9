//! A web shop on seatq: hundreds of customers waiting at once on one client
//! (one listening connection for all), waits that outlive a lost listener
//! and ignore spurious notifications, enqueueing inside the shop's own
//! transaction, requests scheduled for later, and idempotency keys reused
//! for another request.

mod common;

use std::time::Duration;

use chrono::Utc;
use common::{TestDb, client_named, count_requests, hold, sessions, wait_for_listener};
use seatq::{Error, ErrorCode, NewRequest, Request, SeatRequest, Status};

/// A booking of one seat of class 1 for `customer`, under idempotency key `key`.
fn keyed_book(event: i64, customer: &str, key: &str) -> NewRequest {
    NewRequest { idempotency_key: Some(key.to_string()), ..Request::Book(hold(event, 1, 1, customer)).into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_customers_wait_on_one_listening_connection() {
    const CUSTOMERS: usize = 1000;
    let db = TestDb::new().await;
    // Class 3 has seats 50..=600: fewer than the customers, so some are sold out.
    let ev = db.client.add_event("E", 600, 6).await.unwrap();
    let app = "storefront";
    let client = client_named(&db, app, 3).await;
    let requests: Vec<NewRequest> =
        (0..CUSTOMERS).map(|n| Request::Book(hold(ev, 3, 1, &format!("customer-{n}"))).into()).collect();
    let ids = client.enqueue_many(&requests).await.unwrap();

    let waits: Vec<_> = ids
        .iter()
        .map(|&id| {
            let client = client.clone();
            tokio::spawn(async move { client.wait(id, Some(Duration::from_secs(300))).await })
        })
        .collect();
    wait_for_listener(&db, app).await;
    // While all of them wait: the pool's connections and one listener.
    let mut most = 0;
    for _ in 0..10 {
        most = most.max(sessions(&db, app).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!((1..=4).contains(&most), "{most} sessions for {CUSTOMERS} waiting customers");
    assert!(waits.iter().all(|w| !w.is_finished()), "nobody is answered before the worker runs");

    db.drain().await;
    let stored = db.records(&ids).await;
    let mut succeeded = 0;
    for ((wait, id), stored) in waits.into_iter().zip(&ids).zip(&stored) {
        let r = wait.await.expect("wait task").expect("wait");
        assert_eq!(r.id, *id, "each wait returns its own request");
        assert_eq!(r.payload["customer"], stored.payload["customer"]);
        assert_eq!((r.status, &r.error_code), (stored.status, &stored.error_code), "request {id}");
        match r.status {
            Status::Succeeded => succeeded += 1,
            _ => assert_eq!(r.error_code.as_deref(), Some("sold_out"), "{r:?}"),
        }
    }
    assert_eq!(succeeded, 551, "every class-3 seat, once");
    assert_eq!(db.seats_taken(ev).await, 551);
    assert!(sessions(&db, app).await <= 4);
    db.assert_invariants_and_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_finishes_though_its_listener_is_killed() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let app = "storefront-kill";
    let client = client_named(&db, app, 2).await;
    let first = client.enqueue(Request::Book(hold(ev, 1, 1, "ann"))).await.unwrap();
    let second = client.enqueue(Request::Book(hold(ev, 1, 1, "bob"))).await.unwrap();
    let waits: Vec<_> = [first, second]
        .into_iter()
        .map(|id| {
            let client = client.clone();
            tokio::spawn(async move { client.wait(id, Some(Duration::from_secs(60))).await })
        })
        .collect();
    let pid = wait_for_listener(&db, app).await;
    let killed: bool =
        sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pid).fetch_one(&db.pool).await.unwrap();
    assert!(killed);
    // Processed at once: its notification may well go while no one listens.
    db.drain().await;
    for (wait, id) in waits.into_iter().zip([first, second]) {
        let r = tokio::time::timeout(Duration::from_secs(20), wait).await.expect("answered").unwrap().unwrap();
        assert_eq!((r.id, r.status), (id, Status::Succeeded));
    }
    // The hub listens again, on a new connection.
    let third = client.enqueue(Request::Book(hold(ev, 1, 1, "cat"))).await.unwrap();
    let wait = tokio::spawn({
        let client = client.clone();
        async move { client.wait(third, Some(Duration::from_secs(60))).await }
    });
    let again = wait_for_listener(&db, app).await;
    assert_ne!(again, pid, "a new listening session");
    db.drain().await;
    assert_eq!(wait.await.unwrap().unwrap().status, Status::Succeeded);
    assert_eq!(db.seats_taken(ev).await, 3);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_finish_nobody_announces_is_found_by_the_poll() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let id = db.client.enqueue(Request::Book(hold(ev, 1, 1, "ann"))).await.unwrap();
    let waits: Vec<_> = (0..3)
        .map(|_| {
            let client = db.client.clone();
            tokio::spawn(async move { client.wait(id, Some(Duration::from_secs(30))).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Failed by hand, without a NOTIFY: only the batched poll can see it.
    sqlx::query(
        "UPDATE seatq.requests SET status = 'failed', error_code = 'internal', error_message = 'by hand',
         finished_at = now() WHERE id = $1",
    )
    .bind(id)
    .execute(&db.pool)
    .await
    .unwrap();
    for wait in waits {
        let r = tokio::time::timeout(Duration::from_secs(10), wait).await.expect("answered").unwrap().unwrap();
        assert_eq!((r.id, r.status, r.error_code.as_deref()), (id, Status::Failed, Some("internal")));
    }
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_spurious_notification_does_not_end_a_wait() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let app = "storefront-spurious";
    let client = client_named(&db, app, 2).await;
    let id = client.enqueue(Request::Book(hold(ev, 1, 1, "ann"))).await.unwrap();
    let wait = tokio::spawn({
        let client = client.clone();
        async move { client.wait(id, Some(Duration::from_secs(3))).await }
    });
    wait_for_listener(&db, app).await;
    for _ in 0..3 {
        sqlx::query("SELECT pg_notify('seatq_done', $1)").bind(id.to_string()).execute(&db.pool).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match wait.await.unwrap() {
        Err(Error::Timeout(t)) => assert_eq!(t, id),
        other => panic!("the request is still queued, yet the wait ended: {other:?}"),
    }
    assert_eq!(client.status(id).await.unwrap().status, Status::Queued);
    // A wait given up leaves nothing behind: the next one is answered.
    db.drain().await;
    assert_eq!(client.wait(id, Some(Duration::from_secs(30))).await.unwrap().status, Status::Succeeded);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn wait_all_waits_for_every_request_and_names_one_left() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let ids = db
        .client
        .enqueue_many(&(0..5).map(|n| Request::Book(hold(ev, 1, 1, &format!("c{n}"))).into()).collect::<Vec<_>>())
        .await
        .unwrap();
    match db.client.wait_all(&ids, Some(Duration::from_millis(300))).await {
        Err(Error::Timeout(id)) => assert!(ids.contains(&id)),
        other => panic!("nothing was processed: {other:?}"),
    }
    let waiting = tokio::spawn({
        let (client, ids) = (db.client.clone(), ids.clone());
        async move { client.wait_all(&ids, Some(Duration::from_secs(30))).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.drain().await;
    waiting.await.unwrap().expect("every request finished");
    db.client.wait_all(&ids, Some(Duration::ZERO)).await.expect("finished already");
    db.assert_all_succeeded(&ids).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_request_enqueued_in_the_shops_transaction_commits_with_it() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    sqlx::query("CREATE TABLE public.orders (id bigint PRIMARY KEY, request bigint NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let order = |n: i64, customer: &str| {
        let db = &db;
        let request = Request::Hold(hold(ev, 1, 2, customer));
        async move {
            let mut tx = db.pool.begin().await.unwrap();
            let id = seatq::enqueue_in(&mut *tx, request).await.unwrap();
            sqlx::query("INSERT INTO public.orders VALUES ($1, $2)").bind(n).bind(id).execute(&mut *tx).await.unwrap();
            (tx, id)
        }
    };

    let (tx, dropped) = order(1, "ann").await;
    tx.rollback().await.unwrap();
    assert!(matches!(db.client.status(dropped).await, Err(Error::NotFound(id)) if id == dropped));
    assert_eq!(count_requests(&db).await, 0, "rolled back with the order");

    let (tx, kept) = order(2, "bob").await;
    tx.commit().await.unwrap();
    assert_eq!(db.client.status(kept).await.unwrap().status, Status::Queued);
    db.drain().await;
    let r = db.client.wait(kept, Some(Duration::from_secs(30))).await.unwrap();
    assert_eq!((r.status, r.booking().map(|b| b.seats.len())), (Status::Succeeded, Some(2)));
    let orders: Vec<(i64, i64)> =
        sqlx::query_as("SELECT id, request FROM public.orders").fetch_all(&db.pool).await.unwrap();
    assert_eq!(orders, [(2, kept)]);

    // Validated first, like Client::enqueue: nothing reaches the transaction.
    let mut tx = db.pool.begin().await.unwrap();
    let bad = Request::Hold(SeatRequest { party: Some(12), ..hold(ev, 1, 2, "cat") });
    let refused = seatq::enqueue_in(&mut *tx, bad).await;
    assert!(matches!(&refused, Err(Error::Invalid(e)) if e.code == ErrorCode::PartyOutOfRange), "{refused:?}");
    tx.commit().await.unwrap();
    assert_eq!(count_requests(&db).await, 1);
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_request_due_later_waits_for_its_time() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let due = Utc::now() + chrono::Duration::seconds(2);
    let later = NewRequest { run_at: Some(due), ..Request::Book(hold(ev, 1, 1, "ann")).into() };
    let now = Request::Book(hold(ev, 1, 1, "bob")).into();
    let ids = db.client.enqueue_many(&[later.clone(), now]).await.unwrap();
    let single =
        db.client.enqueue(NewRequest { request: Request::Book(hold(ev, 1, 1, "cat")), ..later }).await.unwrap();

    db.drain().await;
    let early = db.records(&[ids[0], ids[1], single]).await;
    assert_eq!(early.iter().map(|r| r.status).collect::<Vec<_>>(), [Status::Queued, Status::Succeeded, Status::Queued]);
    for r in [&early[0], &early[2]] {
        assert!((r.run_at - due).num_milliseconds().abs() < 1, "run_at stored as given: {r:?}");
    }
    assert_eq!(db.seats_taken(ev).await, 1, "nothing due later is processed before its time");

    tokio::time::sleep((due - Utc::now()).to_std().unwrap_or_default() + Duration::from_millis(100)).await;
    db.drain().await;
    db.assert_all_succeeded(&[ids[0], ids[1], single]).await;
    assert_eq!(db.seats_taken(ev).await, 3);

    // From SQL: NULL is now, and the older calls work unchanged.
    for call in [
        "SELECT seatq.enqueue('book', $1)",
        "SELECT seatq.enqueue('book', $1, NULL)",
        "SELECT seatq.enqueue('book', $1, NULL, 0, NULL)",
    ] {
        let payload = Request::Book(hold(ev, 1, 1, "dan")).payload();
        let id: i64 = sqlx::query_scalar(call).bind(payload).fetch_one(&db.pool).await.unwrap();
        let r = db.client.status(id).await.unwrap();
        assert!((Utc::now() - r.run_at).num_seconds() < 5, "{call}: due now: {r:?}");
    }
    db.drain().await;
    assert_eq!(db.seats_taken(ev).await, 6);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_key_reused_for_another_request_is_refused_from_sql() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let enqueue = |kind: &'static str, payload: &'static str| {
        sqlx::query_scalar::<_, i64>("SELECT seatq.enqueue($1, $2::jsonb, 'order-1')")
            .bind(kind)
            .bind(payload.replace("EV", &ev.to_string()))
            .fetch_one(&db.pool)
    };
    let first = enqueue("book", r#"{"event": EV, "class": 1, "party": 2, "customer": "ann"}"#).await.unwrap();
    // The same kind and payload (as jsonb: key order and spacing aside): the first request.
    let same = enqueue("book", r#"{"customer":"ann","party":2,"class":1,"event":EV}"#).await.unwrap();
    assert_eq!(same, first);
    // Another payload, or another kind: refused, with seatq's own SQLSTATE.
    for (kind, payload) in [
        ("book", r#"{"event": EV, "class": 1, "party": 3, "customer": "ann"}"#),
        ("hold", r#"{"event": EV, "class": 1, "party": 2, "customer": "ann"}"#),
    ] {
        let e = enqueue(kind, payload).await.expect_err("a conflict");
        assert!(seatq::sqlstate::is_idempotency_conflict(&e), "{kind} {payload}: {e}");
        assert_eq!(seatq::sqlstate::code(&e).as_deref(), Some(seatq::sqlstate::IDEMPOTENCY_CONFLICT));
        let message = e.as_database_error().map(|d| d.message().to_string()).unwrap_or_default();
        assert!(message.starts_with("idempotency_conflict: "), "{message}");
        assert!(message.contains("order-1") && message.contains(&first.to_string()), "{message}");
    }
    // In one statement, the bulk way (`enqueue_raw` runs the one statement of
    // a bulk enqueue, its requests unchecked by the client): refused as a whole.
    let batch = db
        .client
        .enqueue_raw(
            &["book", "book"],
            &[Request::Book(hold(ev, 1, 1, "bob")).payload(), Request::Book(hold(ev, 1, 1, "cat")).payload()],
            [(None, 0), (Some("order-1".to_string()), 0)].into_iter(),
        )
        .await;
    assert!(
        matches!(&batch, Err(Error::Invalid(e)) if e.code == ErrorCode::IdempotencyConflict && e.message.contains("order-1")),
        "{batch:?}"
    );
    assert_eq!(count_requests(&db).await, 1, "nothing inserted");
    db.drain().await;
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_key_reused_for_another_request_is_refused_from_the_client() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let keyed = |customer: &str, key: &str| keyed_book(ev, customer, key);
    let first = db.client.enqueue(keyed("ann", "order-1")).await.unwrap();
    assert_eq!(db.client.enqueue(keyed("ann", "order-1")).await.unwrap(), first, "same key, same request");
    fn conflict<T: std::fmt::Debug>(r: Result<T, Error>) -> seatq::RequestError {
        match r {
            Err(Error::Invalid(e)) if e.code == ErrorCode::IdempotencyConflict => e,
            other => panic!("not an idempotency conflict: {other:?}"),
        }
    }
    let e = conflict(db.client.enqueue(keyed("bob", "order-1")).await);
    assert_eq!(e.code(), "idempotency_conflict");
    assert_eq!(
        e.message,
        format!("idempotency key \"order-1\" was first used by request {first} with another kind or payload")
    );
    // In the shop's transaction: refused, and the transaction is aborted.
    let mut tx = db.pool.begin().await.unwrap();
    conflict(seatq::enqueue_in(&mut *tx, keyed("bob", "order-1")).await);
    tx.rollback().await.unwrap();

    // Bulk: the conflicts found one by one beforehand ...
    let batch = [keyed("cat", "order-2"), keyed("bob", "order-1"), keyed("dan", "order-2"), keyed("cat", "order-2")];
    let found = db.client.idempotency_conflicts(&batch).await.unwrap();
    let positions: Vec<usize> = found.iter().map(|(i, _)| *i).collect();
    assert_eq!(positions, [1, 2], "{found:?}");
    assert!(found.iter().all(|(_, e)| e.code == ErrorCode::IdempotencyConflict));
    assert!(found[0].1.message.contains(&format!("request {first}")), "{found:?}");
    assert!(found[1].1.message.contains("request 1 of this batch"), "{found:?}");
    // ... else the whole batch refused, either way.
    conflict(db.client.enqueue_many(&batch).await);
    conflict(db.client.enqueue_all(&batch, &seatq::Retry::NEVER).await);
    assert_eq!(count_requests(&db).await, 1, "nothing inserted");
    let ok = [keyed("cat", "order-2"), keyed("ann", "order-1"), keyed("cat", "order-2")];
    let ids = db.client.enqueue_all(&ok, &seatq::Retry::NEVER).await.unwrap();
    assert_eq!((ids[1], ids[0]), (first, ids[2]));
    assert_eq!(count_requests(&db).await, 2);
    db.drain().await;
    db.assert_all_succeeded(&ids).await;
    assert_eq!(db.seats_taken(ev).await, 2);
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn the_conflict_check_finds_every_conflict_of_a_long_file() {
    let (db, ev) = TestDb::with_event("E", 20, 6).await;
    let keyed = |customer: &str, key: &str| keyed_book(ev, customer, key);
    let stored = db.client.enqueue(keyed("zed", "order-stored")).await.unwrap();
    // 3,000 lines, three to a key: the third of every hundredth key asks
    // for another customer; line 1,500 reuses the stored request's key for
    // another customer.
    let batch: Vec<NewRequest> = (0..3000)
        .map(|i| {
            let customer = if i % 300 == 2 { "other".to_string() } else { format!("c{}", i / 3) };
            let key = if i == 1500 { "order-stored".to_string() } else { format!("order-{}", i / 3) };
            keyed(&customer, &key)
        })
        .collect();
    let mut expected: Vec<usize> = (0..3000).filter(|i| i % 300 == 2).collect();
    expected.push(1500);
    expected.sort();
    let found = db.client.idempotency_conflicts(&batch).await.unwrap();
    assert_eq!(found.iter().map(|(i, _)| *i).collect::<Vec<_>>(), expected);
    let stored_conflict = found.iter().find(|(i, _)| *i == 1500).expect("line 1500");
    assert!(stored_conflict.1.message.contains(&format!("request {stored}")), "{found:?}");
    // That its plan reads the batch once (a window over it), not once per
    // line, is checked beside the statement (producer/src/sql/queue.rs).
    db.drain().await;
    assert_eq!(db.seats_taken(ev).await, 1);
    db.assert_invariants_and_close().await;
}
