//! seatq on a Citus cluster (docs/operations.md "Running on Citus"): a
//! private coordinator and two worker nodes, the schema laid out sharded by
//! event, workers booking through the coordinator. Needs Citus installed
//! (`../shared/citus/build.sh`); skipped, in one line, without it, except
//! under CI. Every scenario ends with the invariant check.

mod common;

use std::time::Duration;

use common::citus::{self, Citus};
use seatq::{BookingRef, Client, ErrorCode, NewRequest, Request, Status};
use seatq_worker::{Config, Worker};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Workers on the coordinator's URL, running until stopped.
struct Workers {
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Workers {
    async fn start(url: &str, n: usize) -> Workers {
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        for _ in 0..n {
            let config = Config { concurrency: 2, sweep_interval: Duration::from_millis(200), ..Config::default() };
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

async fn assert_invariants(client: &Client) {
    common::assert_invariants(client, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seatq_books_on_citus_one_event_a_batch() {
    if !citus::installed() {
        return;
    }
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).try_init();
    let cluster = Citus::start(2).await;
    let url = cluster.url();
    let client = Client::connect(&url).await.expect("client connects, migrates and lays the schema out");
    let distributed: bool =
        sqlx::query_scalar("SELECT seatq.distributed()").fetch_one(client.pool()).await.expect("layout");
    assert!(distributed, "the schema is laid out on Citus");

    // Events of 40 seats, 10 a row, spread over the nodes.
    let names: Vec<String> = (0..8).map(|k| format!("citus-{k}")).collect();
    let events = client.add_events(&names, 40, 10).await.expect("events");
    let workers = Workers::start(&url, 2).await;

    // Holds and books of class 1: each event oversold (60 seats asked of 19).
    let mut requests: Vec<NewRequest> = Vec::new();
    for &event in &events {
        for k in 0..20 {
            let r = common::hold(event, 1, 3, &format!("c{k}"));
            requests.push(if k % 2 == 0 { Request::Hold(r) } else { Request::Book(r) }.into());
        }
    }
    let ids = client.enqueue_many(&requests).await.expect("enqueue");
    client.wait_all(&ids, Some(Duration::from_secs(20))).await.expect("every request finished");
    let records = client.outcomes(&ids).await.expect("outcomes");
    let mut booked = 0;
    for (_, outcome, requests) in &records {
        match outcome.as_str() {
            "succeeded" => booked += requests,
            "sold_out" => {}
            other => panic!("unexpected outcome {other}: {records:?}"),
        }
    }
    // Class 1 is seats 1 to 19 (Client::add_events): 6 parties of 3 fit, per event.
    assert_eq!(booked, 6 * events.len() as i64, "{records:?}");
    for &event in &events {
        assert_eq!(client.seats_taken(event).await.expect("seats"), 18, "event {event}");
    }

    // Confirm, cancel and extend name the booking's event.
    let first = client.status(ids[0]).await.expect("status");
    assert_eq!(first.status, Status::Succeeded, "{first:?}");
    let held = first.booking().expect("a hold's booking");
    let by = |event: Option<i64>| BookingRef { event, booking: held.booking, customer: "c0".into(), token: None };
    let other_event = events.iter().copied().find(|&e| e != held.event).expect("another event");
    let wrong = client.enqueue(Request::Confirm(by(Some(other_event)))).await.expect("enqueue");
    let wrong = client.wait(wrong, Some(Duration::from_secs(30))).await.expect("wait");
    assert_eq!(wrong.error_code.as_deref(), Some(ErrorCode::BookingNotFound.as_str()), "{wrong:?}");
    let confirm = client.enqueue(Request::Confirm(by(Some(held.event)))).await.expect("enqueue");
    let confirm = client.wait(confirm, Some(Duration::from_secs(30))).await.expect("wait");
    assert_eq!(confirm.status, Status::Succeeded, "{confirm:?}");

    workers.stop().await;
    assert_invariants(&client).await;
}
