//! seatq through a real PgBouncer (Debian's `pgbouncer`, started by the test
//! on its own port) in transaction mode, with fewer server connections than
//! clients, so that every client's statements land on sessions other clients
//! used: a named prepared statement, a session setting or a `LISTEN` left
//! behind would surface as an error or a wrong answer. Producers, the
//! checkout flow and `seatq serve`'s API go through the pooler; the workers,
//! which need sessions of their own, connect directly. Every test ends with
//! the invariant check.
//!
//! Without PgBouncer it fails under CI and otherwise skips, saying why.

mod common;

use std::time::Duration;

use common::http::Served;
use common::pgbouncer::{self, Bouncer};
use common::{Running, TestDb, code, hold, server_url};
use seatq::{BookingRef, Client, HoldExtension, NewRequest, Request, Retry, Status};
use seatq_worker::Config;
use serde_json::json;

const WAIT: Option<Duration> = Some(Duration::from_secs(60));

/// PgBouncer in `pool_mode` before the test server, for `databases`, with
/// two server connections a database.
fn bouncer(exe: &std::path::Path, pool_mode: &str, databases: &[&str]) -> Bouncer {
    let server = seatq::db::options(&server_url()).expect("test server URL");
    Bouncer::start(exe, pool_mode, (server.get_host(), server.get_port()), databases, 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bookings_and_checkout_through_a_transaction_pooler() {
    let Some(exe) = pgbouncer::find() else { return };
    let (db, ev) = TestDb::with_event("pooled", 2000, 20).await;
    let pooler = bouncer(&exe, "transaction", &[&db.name]);
    let url = pooler.url(&db.name, "pool_mode=transaction");

    // Four clients, two server connections: no session is any client's own.
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients
            .push(Client::connect(&url).await.unwrap_or_else(|e| panic!("through the pooler: {e}\n{}", pooler.log())));
    }
    let running = Running::start(&db, 2, Config::default()).await;

    // A booking load: each client enqueues its own requests, one at a time
    // and in bulk (each bulk in one transaction), and waits for all of them
    // (by polling: a transaction pooler gives no session to LISTEN on).
    let mut load = tokio::task::JoinSet::new();
    for (c, client) in clients.iter().cloned().enumerate() {
        load.spawn(async move {
            let mut ids = Vec::new();
            for k in 0..20 {
                let r = hold(ev, 1 + (k % 3) as i16, 1 + (k % 3) as u32, &format!("one-{c}-{k}"));
                ids.push(client.enqueue(Request::Book(r)).await.expect("enqueue through the pooler"));
            }
            let bulk: Vec<NewRequest> = (0..30)
                .map(|k| NewRequest {
                    idempotency_key: Some(format!("k-{c}-{k}")),
                    ..NewRequest::from(Request::Hold(hold(ev, 3, 2, &format!("bulk-{c}-{k}"))))
                })
                .collect();
            ids.extend(client.enqueue_all(&bulk, &Retry::NEVER).await.expect("bulk through the pooler"));
            client.wait_all(&ids, WAIT).await.expect("outcomes through the pooler");
            let mut records = Vec::new();
            for id in &ids {
                records.push(client.status(*id).await.expect("status through the pooler"));
            }
            records
        });
    }
    let mut records = Vec::new();
    while let Some(done) = load.join_next().await {
        records.extend(done.expect("a client's load"));
    }
    assert_eq!(records.len(), 4 * 50);
    let booked: i64 = records
        .iter()
        .filter(|r| r.status == Status::Succeeded)
        .map(|r| r.booking().expect("a booking").seats.len() as i64)
        .sum();
    let refused: Vec<&str> = records.iter().filter(|r| r.status != Status::Succeeded).map(code).collect();
    assert!(refused.iter().all(|c| *c == "sold_out"), "only sold out may refuse: {refused:?}");
    assert_eq!(booked, db.seats_granted(ev).await, "the seats the outcomes name are the seats taken");

    // The checkout flow through the pooler: hold, extend, confirm; hold, cancel.
    let client = &clients[0];
    let run = |request: Request| async move {
        let id = client.enqueue(request).await.expect("enqueue");
        client.wait(id, WAIT).await.expect("wait")
    };
    let held = run(Request::Hold(hold(ev, 3, 2, "ann"))).await;
    let booking = held.booking().unwrap_or_else(|| panic!("hold: {}", code(&held))).booking;
    let extended = run(Request::Extend(HoldExtension {
        event: None,
        booking,
        customer: "ann".into(),
        hold_seconds: Some(600),
        token: None,
    }))
    .await;
    assert_eq!(code(&extended), "succeeded", "{extended:?}");
    let confirmed =
        run(Request::Confirm(BookingRef { event: None, booking, customer: "ann".into(), token: None })).await;
    assert_eq!(confirmed.booking().map(|b| b.state.as_str()), Some("booked"), "{confirmed:?}");
    let held = run(Request::Hold(hold(ev, 3, 1, "bob"))).await;
    let other = held.booking().unwrap_or_else(|| panic!("hold: {}", code(&held))).booking;
    let cancelled =
        run(Request::Cancel(BookingRef { event: None, booking: other, customer: "bob".into(), token: None })).await;
    assert_eq!(cancelled.booking().map(|b| b.state.as_str()), Some("cancelled"), "{cancelled:?}");

    // `seatq serve` on a client through the pooler: the shop's API and reads.
    let served = Served::start_with(clients[1].clone(), seatq_server::Settings::default()).await;
    let token = seatq::HoldToken::new().expect("randomness").to_string();
    let body =
        json!({"kind": "hold", "payload": {"event": ev, "class": 3, "party": 1, "customer": "cy", "token": token}});
    let (status, record) = served.post("/api/requests?wait=30", &[], &body).await;
    assert_eq!((status, record["status"].as_str()), (200, Some("succeeded")), "{record}");
    let booking = record["result"]["booking"].as_i64().expect("booking id");
    let confirm = json!({"kind": "confirm", "payload": {"booking": booking, "customer": "cy", "token": token}});
    let (status, record) = served.post("/api/requests?wait=30", &[], &confirm).await;
    assert_eq!((status, record["status"].as_str()), (200, Some("succeeded")), "{record}");
    let (status, seats) = served.get(&format!("/api/events/{ev}/availability")).await;
    assert_eq!(status, 200, "{seats}");

    // What the pooler costs a producer, printed (never asserted): one
    // request at a time, direct and through the pooler, alternating.
    let (mut direct_time, mut pooled_time) = (Duration::ZERO, Duration::ZERO);
    let mut ids = Vec::new();
    for round in 0..4 {
        for (via, total) in [(&db.client, &mut direct_time), (client, &mut pooled_time)] {
            let started = std::time::Instant::now();
            for k in 0..50 {
                let r = hold(ev, 3, 1, &format!("cost-{round}-{k}"));
                ids.push(via.enqueue(Request::Hold(r)).await.expect("enqueue"));
            }
            *total += started.elapsed();
        }
    }
    client.wait_all(&ids, WAIT).await.expect("the cost requests' outcomes");
    println!(
        "one enqueue: {:?} direct, {:?} through PgBouncer in transaction mode (200 each, this build)",
        direct_time / 200,
        pooled_time / 200
    );

    running.stop().await;
    common::assert_invariants(client, true).await;
    db.assert_invariants_and_close().await;
}

#[tokio::test]
async fn a_session_url_creates_and_migrates_what_the_pooler_then_serves() {
    let Some(exe) = pgbouncer::find() else { return };
    let name = format!("seatq_test_pooled_{}", std::process::id());
    let pooler = bouncer(&exe, "transaction", &[&name]);
    let direct = seatq::db::url_for(&server_url(), &name).expect("direct URL");
    let pooled = pooler.url(&name, "pool_mode=transaction");

    // Through the pooler alone, a database that is not there cannot be
    // created (that needs a session): refused at once, not retried.
    let alone = Client::connect(&pooled).await.expect_err("no database yet");
    assert!(!alone.is_transient(), "{alone}");
    assert!(alone.to_string().contains("does not exist"), "{alone}");

    let client = Client::connect_with_session(&pooled, Some(&direct)).await.expect("created through the session URL");
    let ev = client.add_event("pooled", 10, 5).await.expect("an event through the pooler");
    // The pooler alone now finds the schema current.
    let alone = Client::connect(&pooled).await.expect("schema current");
    assert_eq!(alone.events(None).await.expect("events").iter().map(|e| e.id).collect::<Vec<_>>(), [ev]);
    drop((client, alone));
    let mut admin = common::admin().await.expect("admin");
    seatq::db::drop_database(&mut admin, &name).await.expect("drop");
}

#[tokio::test]
async fn a_pooler_refusal_is_not_retried_and_a_worker_refuses_a_transaction_pooler() {
    let Some(exe) = pgbouncer::find() else { return };
    let pooler = bouncer(&exe, "transaction", &["seatq_test_listed"]);
    // A database the pooler does not list: PgBouncer's 08P01, said at once.
    let unlisted = Client::connect(&pooler.url("seatq_test_unlisted", "pool_mode=transaction"))
        .await
        .expect_err("not in the pooler's list");
    assert!(!unlisted.is_transient(), "{unlisted}");
    assert!(unlisted.to_string().contains("no such database"), "{unlisted}");

    let worker =
        seatq_worker::Worker::connect(&pooler.url("seatq_test_listed", "pool_mode=transaction"), Config::default())
            .await
            .expect_err("a worker needs a session");
    assert!(worker.to_string().contains("a worker needs a session"), "{worker}");
}
