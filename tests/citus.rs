//! seatq on a Citus cluster (docs/operations.md "Running on Citus"): a
//! private coordinator and two worker nodes per test, the schema laid out
//! sharded by event, workers booking through the coordinator. Needs Citus
//! installed (`../shared/citus/build.sh`); skipped, in one line, without it,
//! except under CI. Every test ends with the invariant check.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::citus::{self, Citus};
use common::{WorkerProcess, code, hold};
use seatq::{BookingRef, Client, HoldExtension, NewRequest, Request, Status};
use seatq_worker::{Config, Worker};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// One cluster at a time: each is three servers on this machine's cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Long enough for anything here to finish on a loaded machine.
const WITHIN: Option<Duration> = Some(Duration::from_secs(120));

/// Workers in this process on the coordinator's URL, running until stopped.
struct Workers {
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Workers {
    async fn start(url: &str, n: usize) -> Workers {
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        for _ in 0..n {
            // No retention here: a pass deletes on every node in one
            // transaction, committed in two phases (off the hot path; see
            // docs/operations.md), which the routing test would count.
            let config = Config {
                concurrency: 2,
                sweep_interval: Duration::from_millis(200),
                retention: None,
                ..Config::default()
            };
            let worker = Worker::connect(url, config).await.expect("worker connects to the coordinator");
            let token = shutdown.clone();
            tracker.spawn(async move { worker.run(token).await });
        }
        Workers { shutdown, tracker }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// A cluster of two worker nodes and a client of its coordinator, which lays
/// the schema out; `None` (skipped) without Citus.
async fn cluster() -> Option<(Citus, Client)> {
    if !citus::installed() {
        return None;
    }
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).try_init();
    let cluster = Citus::start(2).await;
    let client = Client::connect(&cluster.url()).await.expect("client connects, migrates and lays the schema out");
    let distributed: bool =
        sqlx::query_scalar("SELECT seatq.distributed()").fetch_one(client.pool()).await.expect("layout");
    assert!(distributed, "the schema is laid out on Citus");
    Some((cluster, client))
}

/// Enqueue each event's requests in a transaction of its own (one node
/// each: a batch spanning events would commit in two phases) and wait for
/// them all.
async fn enqueue_by_event(client: &Client, requests: Vec<NewRequest>) -> Vec<i64> {
    let mut by_event: HashMap<i64, Vec<NewRequest>> = HashMap::new();
    for r in requests {
        let event = match &r.request {
            Request::Hold(s) | Request::Book(s) => s.event,
            Request::Confirm(b) | Request::Cancel(b) => b.event.expect("an event"),
            Request::Extend(x) => x.event.expect("an event"),
        };
        by_event.entry(event).or_default().push(r);
    }
    let mut ids = Vec::new();
    for batch in by_event.values() {
        ids.extend(client.enqueue_many(batch).await.expect("enqueue"));
    }
    ids
}

async fn done(client: &Client, ids: &[i64]) -> Vec<seatq::RequestRecord> {
    client.wait_all(ids, WITHIN).await.expect("every request finished");
    let mut records = Vec::new();
    for &id in ids {
        records.push(client.status(id).await.expect("status"));
    }
    records
}

/// `per_event` parties of `party` at class 1 of each event, customers c0,
/// c1, ..., holds and books in turn.
fn holds_and_books(events: &[i64], per_event: usize, party: u32) -> Vec<NewRequest> {
    let mut requests = Vec::new();
    for &event in events {
        for k in 0..per_event {
            let r = hold(event, 1, party, &format!("c{k}"));
            requests.push(if k % 2 == 0 { Request::Hold(r) } else { Request::Book(r) }.into());
        }
    }
    requests
}

/// Enqueue one request and wait for its outcome.
async fn finish(client: &Client, request: Request) -> seatq::RequestRecord {
    let id = client.enqueue(request).await.expect("enqueue");
    client.wait(id, WITHIN).await.expect("wait")
}

async fn assert_invariants(client: &Client) {
    common::assert_invariants(client, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_books_confirms_cancels_and_extends_each_on_its_events_node() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    // Events of 40 seats, 10 a row; class 1 is seats 1 to 19 (Client::add_events).
    let names: Vec<String> = (0..8).map(|k| format!("citus-{k}")).collect();
    let events = client.add_events(&names, 40, 10).await.expect("events");
    let workers = Workers::start(&cluster.url(), 2).await;

    // Each event oversold: 20 parties of 3 ask for class 1's 19 seats.
    let ids = enqueue_by_event(&client, holds_and_books(&events, 20, 3)).await;
    let records = done(&client, &ids).await;
    let mut outcomes: HashMap<&str, usize> = HashMap::new();
    for r in &records {
        *outcomes.entry(code(r)).or_default() += 1;
    }
    assert_eq!(outcomes.get("succeeded"), Some(&(6 * events.len())), "6 parties of 3 fit in 19 seats: {outcomes:?}");
    assert_eq!(outcomes.get("sold_out"), Some(&(14 * events.len())), "{outcomes:?}");
    for &event in &events {
        assert_eq!(client.seats_taken(event).await.expect("seats"), 18, "event {event}");
    }

    // Confirm, cancel and extend name the booking's event; a booking named
    // with another event is not found.
    let held: Vec<_> = records.iter().filter_map(|r| r.booking()).filter(|b| b.held_until.is_some()).collect();
    let (a, b, c) = (&held[0], &held[1], &held[2]);
    let elsewhere = events.iter().copied().find(|&e| e != a.event).expect("another event");
    let requests = vec![
        NewRequest::from(Request::Confirm(BookingRef { event: Some(elsewhere), ..BookingRef::to(a) })),
        Request::Confirm(BookingRef::to(a)).into(),
        Request::Cancel(BookingRef::to(b)).into(),
        Request::Extend(HoldExtension {
            event: Some(c.event),
            booking: c.booking,
            customer: c.customer.clone(),
            hold_seconds: Some(1200),
            token: None,
        })
        .into(),
    ];
    let mut ids = Vec::new();
    for r in requests {
        ids.push(client.enqueue(r).await.expect("enqueue"));
    }
    let records = done(&client, &ids).await;
    let codes: Vec<&str> = records.iter().map(code).collect();
    assert_eq!(codes, ["booking_not_found", "succeeded", "succeeded", "succeeded"], "{records:?}");
    assert_eq!(client.seats_taken(b.event).await.expect("seats"), 15, "the cancelled hold's seats are free");

    // Closing an event cuts its holds and stops its sales; a limit given
    // later counts the bookings made before it.
    let (closed, limited) = (events[6], events[7]);
    assert!(client.close_event(closed).await.expect("close"));
    let late = finish(&client, Request::Hold(hold(closed, 2, 1, "late"))).await;
    assert_eq!(code(&late), "sales_closed", "{late:?}");
    let changes = seatq::EventChanges { per_customer: Some(3), ..Default::default() };
    assert!(client.edit_event(limited, &changes).await.expect("edit"));
    let counted: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.bookings WHERE event_id = $1 AND limited")
        .bind(limited)
        .fetch_one(client.pool())
        .await
        .expect("count");
    assert_eq!(counted, 6, "the event's 6 bookings count toward its new limit");
    // The limit holds: 2 seats, then 2 more for the same customer (3 at most).
    let first = finish(&client, Request::Hold(hold(limited, 2, 2, "zed"))).await;
    assert_eq!(code(&first), "succeeded", "{first:?}");
    let more = finish(&client, Request::Hold(hold(limited, 2, 2, "ZED"))).await;
    assert_eq!(code(&more), "customer_limit_exceeded", "{more:?}");

    // The storefront's reads: availability and the seat map, on the event's node.
    let classes = client.availability(events[0]).await.expect("availability");
    let class1 = classes.iter().find(|c| c.class == 1).expect("class 1");
    assert_eq!((class1.seats, class1.free), (19, 19 - client.seats_taken(events[0]).await.expect("taken")));
    assert_eq!(client.seat_map(events[0]).await.expect("seat map").len(), 40);
    let states = client.seat_states(events[0]).await.expect("seat states");
    assert_eq!(states.seats, 40);

    workers.stop().await;
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_event_is_never_oversold_under_many_workers() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let event = client.add_event("hot", 100, 20).await.expect("event");
    let workers = Workers::start(&cluster.url(), 3).await;
    // 150 parties of 2 at class 2's seats 20 to 49 (30 seats), from 6 loops.
    let requests: Vec<NewRequest> =
        (0..150).map(|k| Request::Book(hold(event, 2, 2, &format!("c{k}"))).into()).collect();
    let mut ids = Vec::new();
    for chunk in requests.chunks(10) {
        ids.extend(client.enqueue_many(chunk).await.expect("enqueue"));
    }
    let records = done(&client, &ids).await;
    let booked = records.iter().filter(|r| r.status == Status::Succeeded).count();
    assert_eq!(booked, 15, "30 seats seat 15 parties of 2");
    assert!(records.iter().all(|r| ["succeeded", "sold_out"].contains(&code(r))), "{records:?}");
    assert_eq!(client.seats_taken(event).await.expect("seats"), 30);
    workers.stop().await;
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lapsed_holds_free_their_seats_and_are_swept_on_their_node() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let events = client.add_events(&["lapse-a".to_string(), "lapse-b".to_string()], 20, 10).await.expect("events");
    let workers = Workers::start(&cluster.url(), 1).await;
    let mut lapsing = Vec::new();
    for &event in &events {
        let mut r = hold(event, 1, 9, "ann");
        r.hold_seconds = Some(1);
        lapsing.push(client.enqueue(Request::Hold(r)).await.expect("enqueue"));
    }
    let held = done(&client, &lapsing).await;
    assert!(held.iter().all(|r| r.status == Status::Succeeded), "{held:?}");
    // Passive expiry: once lapsed the seats are free to the next hold,
    // whether or not swept.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Class 1 has 19 seats: two parties of 9 fit only in the lapsed hold's seats too.
    let mut again = Vec::new();
    for &event in &events {
        for customer in ["bob", "cat"] {
            again.push(client.enqueue(Request::Book(hold(event, 1, 9, customer))).await.expect("enqueue"));
        }
    }
    let booked = done(&client, &again).await;
    assert!(booked.iter().all(|r| r.status == Status::Succeeded), "{booked:?}");
    // Active expiry: the sweeper marks every lapsed hold expired, event by event.
    let expired = common::eventually(Duration::from_secs(30), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM seatq.bookings WHERE state = 'expired'")
            .fetch_one(client.pool())
            .await
            .expect("count");
        n == 2
    })
    .await;
    assert!(expired, "both lapsed holds were swept");
    workers.stop().await;
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_returns_the_first_request_per_producer_and_event() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let events = client.add_events(&["key-a".to_string(), "key-b".to_string()], 20, 10).await.expect("events");
    let workers = Workers::start(&cluster.url(), 1).await;
    let keyed = |event: i64, party: u32| NewRequest {
        idempotency_key: Some("order-1".into()),
        ..NewRequest::from(Request::Hold(hold(event, 1, party, "ann")))
    };
    let first = client.enqueue(keyed(events[0], 2)).await.expect("enqueue");
    let again = client.enqueue(keyed(events[0], 2)).await.expect("enqueue again");
    assert_eq!(first, again, "the same key and request return the first request");
    let conflict = client.enqueue(keyed(events[0], 3)).await.expect_err("another request under the key");
    assert_eq!(conflict.code(), "idempotency_conflict", "{conflict}");
    // Keys are unique per producer and event on Citus: the same key for
    // another event is another request (docs/operations.md).
    let other = client.enqueue(keyed(events[1], 2)).await.expect("another event");
    assert_ne!(other, first);
    let records = done(&client, &[first, other]).await;
    assert!(records.iter().all(|r| r.status == Status::Succeeded), "{records:?}");
    assert_eq!(client.seats_taken(events[0]).await.expect("seats"), 2, "booked once");
    workers.stop().await;
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_mid_batch_and_a_worker_node_restarted_lose_and_double_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let names: Vec<String> = (0..6).map(|k| format!("fault-{k}")).collect();
    let events = client.add_events(&names, 100, 20).await.expect("events");
    let url = cluster.url();
    let start = |k: usize| WorkerProcess::start_on(&url, "seatq-citus", &format!("w{k}"), &["--concurrency", "2"], &[]);
    let mut running: Vec<WorkerProcess> = (0..3).map(start).collect();
    let mut rng = fastrand::Rng::with_seed(30);
    let requests: Vec<NewRequest> = (0..600)
        .map(|k| Request::Book(hold(events[k % events.len()], 1 + (k % 3) as i16, 2, &format!("c{k}"))).into())
        .collect();
    let mut ids = Vec::new();
    for chunk in requests.chunks(50) {
        ids.extend(enqueue_by_event(&client, chunk.to_vec()).await);
    }
    // SIGKILL a worker now and then, mid-batch or not, and start another;
    // restart one worker node once.
    for round in 0..8 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let victim = rng.usize(..running.len());
        running.swap_remove(victim).kill();
        running.push(start(10 + round));
        if round == 3 {
            cluster.workers[1].restart(Duration::from_millis(500));
        }
    }
    let records = done(&client, &ids).await;
    assert!(records.iter().all(|r| ["succeeded", "sold_out"].contains(&code(r))), "{records:?}");
    // Every seat a request was told it has is its own, once.
    for &event in &events {
        let granted = client.seats_granted(event).await.expect("granted");
        assert_eq!(client.seats_taken(event).await.expect("taken"), granted, "event {event}");
    }
    let booked = records.iter().filter(|r| r.status == Status::Succeeded).count() as i64;
    let taken: i64 = {
        let mut n = 0;
        for &event in &events {
            n += client.seats_taken(event).await.expect("taken");
        }
        n
    };
    assert_eq!(taken, booked * 2, "each party of 2 that was told it booked holds 2 seats");
    for w in running {
        w.kill();
    }
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_batch_runs_on_one_node_without_two_phase_commit() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    // Events split evenly between the two worker nodes.
    let names: Vec<String> = (0..24).map(|k| format!("routed-{k}")).collect();
    let all = client.add_events(&names, 40, 10).await.expect("events");
    let per_node = cluster.events_by_node(&all).await;
    let n = per_node[0].len().min(per_node[1].len()).min(6);
    assert!(n >= 3, "24 events land on both nodes: {per_node:?}");
    let events: Vec<i64> = per_node.iter().flat_map(|e| e[..n].iter().copied()).collect();

    cluster.log_remote_commands().await;
    let workers = Workers::start(&cluster.url(), 2).await;
    let ids = enqueue_by_event(&client, holds_and_books(&events, 8, 2)).await;
    // Meanwhile no worker node holds a prepared transaction.
    let mut samples = 0;
    let mut prepared_seen = 0i64;
    while client.wait_all(&ids, Some(Duration::from_millis(50))).await.is_err() && samples < 2000 {
        for k in 0..2 {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_prepared_xacts")
                .fetch_one(&mut cluster.node(k).await)
                .await
                .expect("prepared transactions");
            prepared_seen += n;
        }
        samples += 1;
    }
    let records = done(&client, &ids).await;
    assert!(records.iter().all(|r| r.status == Status::Succeeded), "{records:?}");
    // Then confirm and cancel some, on their nodes too.
    let mut more = Vec::new();
    for r in records.iter().filter_map(|r| r.booking()).filter(|b| b.held_until.is_some()).take(6) {
        more.push(client.enqueue(Request::Confirm(BookingRef::to(&r))).await.expect("enqueue"));
    }
    let confirmed = done(&client, &more).await;
    assert!(confirmed.iter().all(|r| r.status == Status::Succeeded), "{confirmed:?}");
    workers.stop().await;

    assert_eq!(prepared_seen, 0, "no prepared transaction on a worker node in {samples} samples");
    let (transactions, prepares) = cluster.writing_transactions();
    assert!(prepares.is_empty(), "two-phase commits, after: {prepares:#?}");
    assert!(transactions.len() >= events.len(), "the batches' transactions were logged: {}", transactions.len());
    let spanning: Vec<_> = transactions.iter().filter(|(_, nodes)| nodes.len() != 1).collect();
    assert!(spanning.is_empty(), "writing transactions on more than one node: {spanning:?}");
    // Both nodes carried bookings, evenly.
    let mut bookings = [0i64; 2];
    for r in records.iter().filter_map(|r| r.booking()) {
        bookings[if per_node[0].contains(&r.event) { 0 } else { 1 }] += 1;
    }
    let share = bookings[0] as f64 / (bookings[0] + bookings[1]) as f64;
    assert!((0.35..=0.65).contains(&share), "bookings per node: {bookings:?}");
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_see_only_their_own_requests_and_bookings() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let event = client.add_event("shops", 20, 10).await.expect("event");
    for shop in ["shop_a", "shop_b"] {
        let create = format!("CREATE ROLE {shop} LOGIN IN ROLE seatq_producer");
        sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(client.pool()).await.expect("a producer login");
    }
    let as_shop = |shop: &str| format!("postgres://{shop}@127.0.0.1:{}/postgres", cluster.coordinator.port);
    let a = Client::connect(&as_shop("shop_a")).await.expect("shop a connects");
    let b = Client::connect(&as_shop("shop_b")).await.expect("shop b connects");
    let workers = Workers::start(&cluster.url(), 1).await;
    let id = a.enqueue(Request::Hold(hold(event, 1, 2, "ann"))).await.expect("enqueue");
    let held = a.wait(id, WITHIN).await.expect("shop a reads its request");
    assert_eq!(held.status, Status::Succeeded, "{held:?}");
    let booking = held.booking().expect("a booking");
    assert!(b.status(id).await.is_err(), "shop b cannot read shop a's request");
    // Shop b cannot cancel shop a's hold, even naming it right.
    let refused = finish(&b, Request::Cancel(BookingRef::to(&booking))).await;
    assert_eq!(code(&refused), "booking_not_found", "{refused:?}");
    let theirs: i64 =
        sqlx::query_scalar("SELECT count(*) FROM seatq.bookings").fetch_one(b.pool()).await.expect("count");
    assert_eq!(theirs, 0, "shop b sees no booking of shop a");
    assert_eq!(client.seats_taken(event).await.expect("seats"), 2, "shop a's hold stands");
    // Nor can a producer insert an outcome, or a request as another producer.
    for forged in [
        format!(
            "INSERT INTO seatq.requests (event_id, kind, payload, status, result)
             VALUES ({event}, 'book', '{{\"event\": {event}}}', 'succeeded', '{{}}')"
        ),
        format!(
            "INSERT INTO seatq.requests (event_id, kind, payload, producer)
             VALUES ({event}, 'book', '{{\"event\": {event}}}', 'shop_a')"
        ),
    ] {
        let refused = sqlx::raw_sql(sqlx::AssertSqlSafe(forged.clone())).execute(b.pool()).await;
        assert!(refused.is_err(), "refused: {forged}");
    }
    workers.stop().await;
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_added_and_shards_rebalanced_under_load_lose_and_double_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((mut cluster, client)) = cluster().await else { return };
    let names: Vec<String> = (0..16).map(|k| format!("grow-{k}")).collect();
    let events = client.add_events(&names, 100, 20).await.expect("events");
    let workers = Workers::start(&cluster.url(), 2).await;
    let requests = |round: usize| -> Vec<NewRequest> {
        (0..160)
            .map(|k| {
                let event = events[k % events.len()];
                Request::Book(hold(event, 1 + (k % 3) as i16, 1, &format!("r{round}-{k}"))).into()
            })
            .collect()
    };
    let mut ids = enqueue_by_event(&client, requests(0)).await;
    cluster.add_node().await;
    // The rebalance runs in the background while more requests come.
    let mut coordinator = cluster.coordinator().await;
    sqlx::raw_sql("SELECT citus_rebalance_start()").execute(&mut coordinator).await.expect("start the rebalance");
    for round in 1..4 {
        ids.extend(enqueue_by_event(&client, requests(round)).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    sqlx::raw_sql("SELECT citus_rebalance_wait()").execute(&mut coordinator).await.expect("the rebalance ends");
    ids.extend(enqueue_by_event(&client, requests(4)).await);
    let records = done(&client, &ids).await;
    assert!(records.iter().all(|r| ["succeeded", "sold_out"].contains(&code(r))), "{records:?}");
    let mut moved = 0;
    for &event in &events {
        moved += usize::from(cluster.node_of(event).await == 2);
    }
    assert!(moved > 0, "the rebalance moved some events to the new node");
    let booked = records.iter().filter(|r| r.status == Status::Succeeded).count() as i64;
    let mut taken = 0;
    for &event in &events {
        taken += client.seats_taken(event).await.expect("taken");
    }
    assert_eq!(taken, booked, "each party of 1 told it booked holds its seat, once");
    workers.stop().await;
    assert_invariants(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_api_books_and_answers_on_citus() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let event = client.add_event("served", 20, 10).await.expect("event");
    let workers = Workers::start(&cluster.url(), 1).await;
    let served = common::http::Served::start_with(client.clone(), seatq_server::Settings::default()).await;
    // A hold, answered when its outcome is recorded (the worker's
    // notification, raised on the coordinator, reaches the server's waiter).
    let token = seatq::HoldToken::new().expect("a token").to_string();
    let hold = serde_json::json!({"kind": "hold",
        "payload": {"event": event, "class": 1, "party": 2, "customer": "ann", "token": token}});
    let (status, held) = served.post("/api/requests?wait=30", &[], &hold).await;
    assert_eq!(status, 200, "{held}");
    assert_eq!(held["status"], "succeeded", "{held}");
    let booking = &held["result"]["booking"];
    // Confirmed through the API with the booking's event and token.
    let confirm = serde_json::json!({"kind": "confirm",
        "payload": {"booking": booking, "event": event, "customer": "ann", "token": token}});
    let (status, confirmed) = served.post("/api/requests?wait=30", &[], &confirm).await;
    assert_eq!(status, 200, "{confirmed}");
    assert_eq!(confirmed["status"], "succeeded", "{confirmed}");
    assert_eq!(confirmed["result"]["state"], "booked", "{confirmed}");
    let (status, map) = served.get(&format!("/api/events/{event}/availability")).await;
    assert_eq!(status, 200, "{map}");
    drop(served);
    workers.stop().await;
    assert_eq!(client.seats_taken(event).await.expect("seats"), 2);
    assert_invariants(&client).await;
}

/// The waiting list on Citus: parties of events on both nodes join their
/// event's list, a cancel hands its seats to the list in its own
/// transaction, a lapsed hold swept does the same, a wait ends `sold_out`;
/// every transaction that writes stays on its event's node, with no
/// two-phase commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_list_is_served_on_each_events_node() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((cluster, client)) = cluster().await else { return };
    let names: Vec<String> = (0..16).map(|k| format!("waiting-{k}")).collect();
    let all = client.add_events(&names, 2, 2).await.expect("events");
    let events: Vec<i64> = cluster.events_by_node(&all).await.iter().filter_map(|on| on.first().copied()).collect();
    assert_eq!(events.len(), 2, "an event on each node");

    cluster.log_remote_commands().await;
    let workers = Workers::start(&cluster.url(), 1).await;
    let mut held = Vec::new();
    for &event in &events {
        for k in 0..2 {
            held.push(finish(&client, Request::Hold(hold(event, 1, 1, &format!("h{k}")))).await);
        }
    }
    let mut waiting = Vec::new();
    for &event in &events {
        for (k, secs) in [(0, 600), (1, 1)] {
            let mut r = hold(event, 1, 1, &format!("w{k}"));
            r.wait_seconds = Some(secs);
            waiting.push(client.enqueue(Request::Hold(r)).await.expect("enqueue"));
        }
    }
    assert!(
        common::eventually(Duration::from_secs(60), || async {
            let mut all_waiting = true;
            for &id in &waiting {
                all_waiting &= client.status(id).await.expect("status").status == Status::Waiting;
            }
            all_waiting
        })
        .await,
        "every party joined its event's list"
    );
    let place = client.status(waiting[0]).await.expect("status").place.expect("a place");
    assert_eq!(place.parties_ahead, 0);
    let place = client.status(waiting[1]).await.expect("status").place.expect("a place");
    assert_eq!(place.parties_ahead, 1);
    // The 1-second waits end sold out, by the sweeper on each node.
    for &id in [waiting[1], waiting[3]].iter() {
        let r = client.wait(id, WITHIN).await.expect("wait");
        assert_eq!(code(&r), "sold_out", "{r:?}");
    }
    // On the first event a cancel frees a seat; on the second a hold lapses.
    let first = held[0].booking().expect("held");
    let cancelled = finish(&client, Request::Cancel(BookingRef::to(&first))).await;
    assert_eq!(cancelled.status, Status::Succeeded, "{cancelled:?}");
    sqlx::query("SELECT seatq.cut_holds($1, now() - interval '1 minute')")
        .bind(events[1])
        .execute(client.pool())
        .await
        .expect("lapse the second event's holds");
    for (&id, event) in [waiting[0], waiting[2]].iter().zip(&events) {
        let r = client.wait(id, WITHIN).await.expect("wait");
        let b = r.booking().unwrap_or_else(|| panic!("handed seats: {r:?}"));
        assert_eq!((b.event, b.seats.len()), (*event, 1));
        assert!(b.held_until.is_some_and(|t| t > chrono::Utc::now() + chrono::Duration::seconds(500)), "{b:?}");
    }
    let public = finish(&client, Request::Hold(hold(events[1], 1, 1, "late"))).await;
    assert_eq!(code(&public), "succeeded", "the list is empty: the public may book again: {public:?}");
    workers.stop().await;

    let (transactions, prepares) = cluster.writing_transactions();
    assert!(prepares.is_empty(), "two-phase commits, after: {prepares:#?}");
    let spanning: Vec<_> = transactions.iter().filter(|(_, nodes)| nodes.len() != 1).collect();
    assert!(spanning.is_empty(), "writing transactions on more than one node: {spanning:?}");
    assert_invariants(&client).await;
}
